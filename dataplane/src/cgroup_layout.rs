//! Where this process's CPU cgroups are: the hierarchy whose controller caps CPU time (v2
//! `cpu.max` where the unified hierarchy has the `cpu` controller, v1 `cpu.cfs_quota_us`
//! otherwise) and, where v1 mounts `cpuacct` apart from `cpu`, that second hierarchy too, so a
//! capped worker's CPU usage can be read from its own group there.
//!
//! Found from `/proc/self/mountinfo` (which hierarchy is mounted where, and which subtree of
//! it) and `/proc/self/cgroup` (which group of each hierarchy this process is in), never from
//! a fixed `/sys/fs/cgroup/...` path: containers mount the hierarchies elsewhere or mount only
//! a subtree.

use std::path::{Path, PathBuf};

/// A cgroup hierarchy's interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    /// cgroup v1: one hierarchy per controller (or per co-mounted set).
    V1,
    /// cgroup v2: the unified hierarchy.
    V2,
}

/// One hierarchy, seen from this process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hierarchy {
    pub version: Version,
    /// The directory of the group this process is in (the parent of every group it makes).
    pub own_dir: PathBuf,
    /// Whether this hierarchy caps CPU time (false: the separate v1 `cpuacct` one).
    pub caps: bool,
}

/// The hierarchies a capped worker joins: the capping one first, then a separate v1
/// `cpuacct` one when there is one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    pub hierarchies: Vec<Hierarchy>,
}

/// This process's layout, read from `/proc/self`.
pub fn detect() -> Result<Layout, String> {
    let read = |p: &str| std::fs::read_to_string(p).map_err(|e| format!("reading {p}: {e}"));
    let mountinfo = read("/proc/self/mountinfo")?;
    let membership = read("/proc/self/cgroup")?;
    layout(&mountinfo, &membership, |dir| {
        std::fs::read_to_string(dir.join("cgroup.controllers")).unwrap_or_default()
    })
}

/// The layout from the two files' text; `controllers(dir)` reads a v2 group's
/// `cgroup.controllers` (which controllers that group may use).
pub fn layout(
    mountinfo: &str,
    membership: &str,
    controllers: impl Fn(&Path) -> String,
) -> Result<Layout, String> {
    let mounts: Vec<Mount> = mountinfo.lines().filter_map(parse_mount).collect();
    let v2 = mounts
        .iter()
        .find(|m| m.fstype == "cgroup2")
        .and_then(|m| own_dir(m, group_of(membership, None)?));
    if let Some(dir) = v2
        && controllers(&dir).split_whitespace().any(|c| c == "cpu")
    {
        return Ok(Layout {
            hierarchies: vec![Hierarchy {
                version: Version::V2,
                own_dir: dir,
                caps: true,
            }],
        });
    }
    let v1 = |controller: &str| {
        let m = mounts
            .iter()
            .find(|m| m.fstype == "cgroup" && m.controllers.iter().any(|c| c == controller))?;
        Some((m, own_dir(m, group_of(membership, Some(controller))?)?))
    };
    let Some((cpu_mount, cpu_dir)) = v1("cpu") else {
        return Err(
            "no cgroup hierarchy with the cpu controller is mounted (neither v2 \
                    with cpu in cgroup.controllers nor a v1 cpu hierarchy)"
                .into(),
        );
    };
    let mut hierarchies = vec![Hierarchy {
        version: Version::V1,
        own_dir: cpu_dir,
        caps: true,
    }];
    if !cpu_mount.controllers.iter().any(|c| c == "cpuacct")
        && let Some((_, acct_dir)) = v1("cpuacct")
    {
        hierarchies.push(Hierarchy {
            version: Version::V1,
            own_dir: acct_dir,
            caps: false,
        });
    }
    Ok(Layout { hierarchies })
}

/// A cgroup mount from one line of `/proc/self/mountinfo`.
struct Mount {
    /// The subtree of the hierarchy mounted here (`/` for all of it).
    root: String,
    point: PathBuf,
    fstype: String,
    /// v1: the controllers in the super options (`cpu`, `cpuacct`, ...).
    controllers: Vec<String>,
}

/// `id parent maj:min root point options [optional...] - fstype source superoptions`.
fn parse_mount(line: &str) -> Option<Mount> {
    let (left, right) = line.split_once(" - ")?;
    let l: Vec<&str> = left.split(' ').collect();
    let r: Vec<&str> = right.split(' ').collect();
    let fstype = *r.first()?;
    if fstype != "cgroup" && fstype != "cgroup2" {
        return None;
    }
    Some(Mount {
        root: unescape(l.get(3)?),
        point: PathBuf::from(unescape(l.get(4)?)),
        fstype: fstype.to_owned(),
        controllers: r
            .get(2)
            .map(|s| s.split(',').map(str::to_owned).collect())
            .unwrap_or_default(),
    })
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo` octal.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b.get(i + 1..i + 4).and_then(|d| {
            let t = std::str::from_utf8(d).ok()?;
            u8::from_str_radix(t, 8).ok()
        });
        match (b[i], octal) {
            (b'\\', Some(c)) => {
                out.push(c);
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// This process's group in a hierarchy, from `/proc/self/cgroup` (`id:controllers:path`):
/// the v1 hierarchy with `controller`, or the v2 one (`0::path`) for `None`.
fn group_of<'a>(membership: &'a str, controller: Option<&str>) -> Option<&'a str> {
    membership.lines().find_map(|line| {
        let mut f = line.splitn(3, ':');
        let (id, ctl, path) = (f.next()?, f.next()?, f.next()?);
        let hit = match controller {
            None => id == "0" && ctl.is_empty(),
            Some(c) => ctl.split(',').any(|x| x == c),
        };
        hit.then_some(path)
    })
}

/// The directory of `group` under mount `m`: the group's path is relative to the hierarchy's
/// root, and the mount shows the subtree `m.root`. None when the group is outside that
/// subtree (it cannot be reached through this mount).
fn own_dir(m: &Mount, group: &str) -> Option<PathBuf> {
    let rest = if m.root == "/" {
        group
    } else {
        let r = group.strip_prefix(m.root.as_str())?;
        if !(r.is_empty() || r.starts_with('/')) {
            return None;
        }
        r
    };
    Some(m.point.join(rest.trim_start_matches('/')))
}

#[cfg(test)]
mod tests {
    use super::*;

    const V1_SPLIT: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";
    const V1_SPLIT_CG: &str = "2:cpuacct:/a\n1:cpu:/\n0::/\n";

    #[test]
    fn separate_v1_cpu_and_cpuacct_give_two_hierarchies() {
        let l = layout(V1_SPLIT, V1_SPLIT_CG, |_| "hugetlb".into()).unwrap();
        assert_eq!(l.hierarchies.len(), 2);
        assert_eq!(l.hierarchies[0].own_dir, Path::new("/sys/fs/cgroup/cpu"));
        assert!(l.hierarchies[0].caps && !l.hierarchies[1].caps);
        assert_eq!(
            l.hierarchies[1].own_dir,
            Path::new("/sys/fs/cgroup/cpuacct/a")
        );
    }

    #[test]
    fn co_mounted_cpu_cpuacct_is_one_hierarchy() {
        let mi = "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n";
        let l = layout(mi, "3:cpu,cpuacct:/x/y\n", |_| String::new()).unwrap();
        assert_eq!(l.hierarchies.len(), 1);
        assert_eq!(
            l.hierarchies[0].own_dir,
            Path::new("/sys/fs/cgroup/cpu,cpuacct/x/y")
        );
    }

    #[test]
    fn v2_with_the_cpu_controller_wins_and_mount_roots_are_stripped() {
        let mi = "41 31 0:38 /user.slice /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
        let cg = "0::/user.slice/run.scope\n";
        let l = layout(mi, cg, |_| "cpuset cpu io memory pids".into()).unwrap();
        assert_eq!(l.hierarchies[0].version, Version::V2);
        assert_eq!(
            l.hierarchies[0].own_dir,
            Path::new("/sys/fs/cgroup/run.scope")
        );
        // v2 without the cpu controller and no v1 cpu: a clear refusal.
        assert!(layout(mi, cg, |_| "memory pids".into()).is_err());
    }

    #[test]
    fn escaped_mount_points_and_outside_groups() {
        assert_eq!(unescape(r"/a\040b"), "/a b");
        let mi = "32 31 0:29 /docker/c1 /cg\\040x rw - cgroup cgroup rw,cpu\n";
        let l = layout(mi, "1:cpu:/docker/c1/w\n", |_| String::new()).unwrap();
        assert_eq!(l.hierarchies[0].own_dir, Path::new("/cg x/w"));
        assert!(layout(mi, "1:cpu:/docker/c10\n", |_| String::new()).is_err());
    }
}
