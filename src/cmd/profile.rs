//! The machine profile: what `clasp calibrate` measured on this machine, kept in the user's
//! config directory so every later `clasp run` starts its estimator from this machine's costs
//! instead of generic priors that may be several times off.
//!
//! The file is JSON with a `version`; a reader refuses a version it does not know rather than
//! guess. The figures are the planner's α, β, γ in its own units (see [`Profile`]), so a
//! profile is directly comparable with `estimates` in `clasp run --json`.

use clasp_controlplane::model::CostModel;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::ErrorKind::NotFound;
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// The profile format this build writes and reads.
/// Version 2: β counts a remote request's hand-offs on the executors (α) beside the
/// transport's work; version 1's β was the transport's alone.
pub const PROFILE_VERSION: u32 = 2;
/// The profile's place under the config directory.
const PROFILE_RELATIVE_PATH: &str = "clasp/profile.json";
/// A profile larger than this is not one `clasp calibrate` wrote.
const MAX_PROFILE_BYTES: u64 = 1 << 20;

/// The machine a profile was measured on.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// The CPU's model name (`/proc/cpuinfo`).
    pub cpu_model: String,
    /// Online CPUs.
    pub cpus: usize,
    /// The kernel release.
    pub kernel: String,
}

impl Machine {
    /// This machine.
    pub fn this() -> Machine {
        let cpu_model = clasp_benches::machine::cpu_model();
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|k| k.trim().to_string())
            .unwrap_or_else(|_| "unknown".into());
        Machine {
            cpu_model,
            cpus,
            kernel,
        }
    }
}

/// A machine profile. α, β, γ are the planner's: α CPU µs per local chained request, β CPU µs
/// per remote chained request at the transport's default batch, both counting the sender's and
/// the receiver's side; γ CPU µs per second per distinct remote destination. A remote request
/// is handed off by executors as a local one is (the sending executor routes and writes it,
/// the receiving one pops and parses it) and carried by the transport between them, so β is α plus
/// the transport's cost (`transport_by_batch_us`, what `clasp bench dispatch` reports as β).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    /// [`PROFILE_VERSION`].
    pub version: u32,
    /// α (µs).
    pub alpha_us: f64,
    /// β at [`Profile::batch`] (µs).
    pub beta_us: f64,
    /// γ (µs per second per destination).
    pub gamma_us: f64,
    /// β by batch size, requests per batch → µs.
    #[serde(default)]
    pub beta_by_batch_us: BTreeMap<String, f64>,
    /// The transport's part of β by batch size (both sides' whole-process CPU of the loopback
    /// runs), requests per batch → µs.
    #[serde(default)]
    pub transport_by_batch_us: BTreeMap<String, f64>,
    /// The transport's default batch in requests of the measured size: the batch of `beta_us`.
    #[serde(default)]
    pub batch: usize,
    /// Where it was measured.
    #[serde(default)]
    pub machine: Machine,
    /// When it was measured (seconds since the Unix epoch).
    #[serde(default)]
    pub created_unix_s: u64,
    /// Cores other work on the machine used on average while it was measured (a busy machine
    /// makes the figures less trustworthy); absent where it could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_work_cores: Option<f64>,
    /// CPU µs one sleep and wake-up of a parked thread costs the sleeper (what the busy-time
    /// estimator's ω learns live); absent in profiles written before it was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wake_us: Option<f64>,
}

impl Profile {
    /// The estimator's starting costs.
    pub fn costs(&self) -> CostModel {
        CostModel {
            alpha_us: self.alpha_us,
            beta_us: self.beta_us,
            gamma_us: self.gamma_us,
        }
    }

    /// Checks what a reader relies on: the version, α, β, γ positive and finite, and the other
    /// figures within their ranges.
    pub fn check(&self) -> Result<(), String> {
        if self.version != PROFILE_VERSION {
            return Err(format!(
                "version {} (this clasp reads version {PROFILE_VERSION}; run `clasp calibrate` \
                 again)",
                self.version
            ));
        }
        // The planner sums costs times rates: the bound of its inputs keeps that finite.
        let max = clasp_controlplane::model::MAX_QUANTITY;
        for (name, v) in [
            ("alpha_us", self.alpha_us),
            ("beta_us", self.beta_us),
            ("gamma_us", self.gamma_us),
        ] {
            if !(v.is_finite() && v > 0.0 && v <= max) {
                return Err(format!(
                    "{name} is {v}, not a positive number up to {max:e}"
                ));
            }
        }
        let by_batch = (self
            .beta_by_batch_us
            .iter()
            .map(|(b, v)| ("beta_by_batch_us", b, v)))
        .chain((self.transport_by_batch_us.iter()).map(|(b, v)| ("transport_by_batch_us", b, v)));
        for (name, batch, &v) in by_batch {
            if batch.parse::<u64>().map_or(true, |b| b == 0) || !(0.0..=max).contains(&v) {
                return Err(format!(
                    "{name} {batch:?}: {v}: a batch of requests (a positive whole number) and \
                     µs from 0 to {max:e}"
                ));
            }
        }
        match (self.wake_us, self.other_work_cores) {
            (Some(v), _) if !(0.0..=max).contains(&v) => Err(format!(
                "wake_us is {v}, not a number of µs from 0 to {max:e}"
            )),
            (_, Some(c)) if !(0.0..=max).contains(&c) => Err(format!(
                "other_work_cores is {c}, not a number of cores from 0 to {max:e}"
            )),
            _ => Ok(()),
        }
    }
}

/// Where the profile lives: `$XDG_CONFIG_HOME/clasp/profile.json`, else
/// `$HOME/.config/clasp/profile.json`; None when neither is set.
pub fn default_path() -> Option<PathBuf> {
    path_from(
        std::env::var_os("XDG_CONFIG_HOME"),
        std::env::var_os("HOME"),
    )
}

/// [`default_path`] for the given variables. As the XDG base directory rules say, an empty or
/// relative `XDG_CONFIG_HOME` is ignored.
fn path_from(xdg_config_home: Option<OsString>, home: Option<OsString>) -> Option<PathBuf> {
    let absolute = |v: Option<OsString>| {
        v.map(PathBuf::from)
            .filter(|p| p.is_absolute() && !p.as_os_str().is_empty())
    };
    let config = absolute(xdg_config_home).or_else(|| absolute(home).map(|h| h.join(".config")))?;
    Some(config.join(PROFILE_RELATIVE_PATH))
}

/// Reads and checks a profile.
pub fn load(path: &Path) -> Result<Profile, String> {
    use std::os::unix::fs::OpenOptionsExt as _;
    // Opened without waiting: a FIFO there would keep every run waiting for a writer.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(path)
        .map_err(|e| e.to_string())?;
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return Err("not a regular file".into());
    }
    let mut text = String::new();
    std::io::Read::read_to_string(
        &mut std::io::Read::take(file, MAX_PROFILE_BYTES + 1),
        &mut text,
    )
    .map_err(|e| e.to_string())?;
    if text.len() as u64 > MAX_PROFILE_BYTES {
        return Err(format!("larger than {MAX_PROFILE_BYTES} bytes"));
    }
    let profile: Profile = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    profile.check()?;
    Ok(profile)
}

/// Whether [`save`] may create the directory a profile goes into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parent {
    /// The default place ([`default_path`]): the tool's own directory under the user's config,
    /// made on first use.
    Create,
    /// A path the user named (`clasp calibrate --out`): a directory missing there is more
    /// likely a typo than a wish, and making it would leave directories wherever the typo
    /// pointed.
    MustExist,
}

/// The file [`save`] would replace for `path`, or why it cannot: `clasp calibrate` asks before
/// it measures, so a bad target is refused at once rather than after the measurement.
///
/// The profile is renamed over the file, so it must be a regular file or absent: a rename over
/// a device, a FIFO or a socket replaces the node itself (as root, `/dev/full` would become a
/// regular file), and one over a directory fails, but only after the measurement. A symbolic
/// link is followed and its target checked and replaced, keeping the link: renaming over the
/// link would replace it with a plain file, cutting off a profile kept elsewhere (a dotfiles
/// repository, say), and a link to a device is refused like the device.
pub fn target(path: &Path, parent: Parent) -> Result<PathBuf, String> {
    let file = follow(path)?;
    // Errors name the path as given, and where it leads when that is elsewhere.
    let named = if file.as_path() == path {
        path.display().to_string()
    } else {
        format!("{} (a link to {})", path.display(), file.display())
    };
    if file.file_name().is_none() {
        return Err(format!("{named} is not a file name"));
    }
    let dir = dir_of(&file);
    match std::fs::metadata(&dir) {
        Ok(m) if !m.is_dir() => return Err(format!("{} is not a directory", dir.display())),
        Err(e) if e.kind() == NotFound && parent == Parent::MustExist => {
            return Err(format!("the directory {} does not exist", dir.display()));
        }
        Err(e) if e.kind() != NotFound => return Err(format!("{}: {e}", dir.display())),
        // The profile is written beside the file and renamed over it: a directory that takes
        // no new file (read-only, not ours, /proc) would fail only after the measurement.
        Ok(_) => {
            tempfile::Builder::new()
                .prefix(".clasp-probe")
                .tempfile_in(&dir)
                .map_err(|e| format!("{named}: cannot write into {}: {e}", dir.display()))?;
        }
        _ => {}
    }
    match std::fs::metadata(&file) {
        Ok(m) if m.is_dir() => Err(format!("{named} is a directory")),
        // A trailing `/` would make the final rename fail (ENOTDIR), after the measurement.
        _ if path.as_os_str().as_encoded_bytes().ends_with(b"/") => {
            Err(format!("{named} ends in /, which names a directory"))
        }
        Ok(m) if !m.is_file() => Err(format!("{named} is not a regular file")),
        Err(e) if e.kind() != NotFound => Err(format!("{named}: {e}")),
        _ => Ok(file),
    }
}

/// `path` with a symbolic link as its last component followed to its final target (the
/// directories before it are the kernel's to follow, as any open does). A link that leads
/// nowhere is refused: creating its target would put the profile somewhere nobody named.
fn follow(path: &Path) -> Result<PathBuf, String> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => std::fs::canonicalize(path).map_err(|e| {
            format!(
                "{} is a symbolic link that cannot be followed: {e}",
                path.display()
            )
        }),
        _ => Ok(path.to_path_buf()),
    }
}

/// The directory `file` is in (`.` for a bare name).
fn dir_of(file: &Path) -> PathBuf {
    match file.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Writes `profile` to `path` atomically: into a temporary file beside it, synced, then renamed
/// over it (and the directory synced), so a reader sees the old profile or the new one, never
/// half of one. Creates the parent directories only for [`Parent::Create`].
///
/// [`target`] is checked again here, as the calibration before took seconds in which the path
/// could change; what is left open is the moment between this check and the rename, which no
/// rename can close (there is no "replace only a regular file").
pub fn save(path: &Path, profile: &Profile, parent: Parent) -> Result<(), String> {
    let path = target(path, parent)?;
    let dir = dir_of(&path);
    if parent == Parent::Create {
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let name = path
        .file_name()
        .ok_or_else(|| format!("{}: not a file name", path.display()))?;
    let mut tmp_name = OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".tmp.{}", std::process::id()));
    let tmp = dir.join(tmp_name);
    let written = (|| -> std::io::Result<()> {
        // A new file, never one already there: a leftover of an earlier process with this pid
        // is removed first, and a link planted under this name is not followed.
        let _ = std::fs::remove_file(&tmp);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        let json = serde_json::to_string_pretty(profile).map_err(std::io::Error::other)?;
        f.write_all(json.as_bytes())?;
        f.write_all(b"\n")?;
        f.sync_all()?;
        std::fs::rename(&tmp, &path)?;
        // The rename itself is durable once the directory is.
        std::fs::File::open(&dir)?.sync_all()
    })();
    written.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!("{}: {e}", path.display())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(s: &str) -> Option<OsString> {
        Some(OsString::from(s))
    }

    #[test]
    fn the_profile_lives_under_xdg_config_home_when_it_is_set() {
        assert_eq!(
            path_from(os("/x/cfg"), os("/home/u")),
            Some(PathBuf::from("/x/cfg/clasp/profile.json"))
        );
    }

    #[test]
    fn without_xdg_config_home_the_profile_lives_under_home_dot_config() {
        let want = Some(PathBuf::from("/home/u/.config/clasp/profile.json"));
        assert_eq!(path_from(None, os("/home/u")), want);
        // Empty or relative XDG_CONFIG_HOME is ignored, as the XDG rules say.
        assert_eq!(path_from(os(""), os("/home/u")), want);
        assert_eq!(path_from(os("rel/cfg"), os("/home/u")), want);
    }

    /// A FIFO where the profile goes is refused at once, not waited on for a writer (which
    /// held every `clasp run` that reads the default profile).
    #[test]
    fn a_fifo_as_the_profile_is_refused_without_waiting() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("profile.json");
        let owner_rw = rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR;
        rustix::fs::mkfifoat(rustix::fs::CWD, &path, owner_rw).unwrap();
        // On a thread: a load that waits on the FIFO fails the test instead of hanging it.
        let (tx, rx) = std::sync::mpsc::channel();
        let probed = path.clone();
        std::thread::spawn(move || tx.send(load(&probed).map(drop)));
        let loaded = rx.recv_timeout(std::time::Duration::from_secs(10));
        assert_eq!(loaded, Ok(Err("not a regular file".to_string())));
        assert!(load(dir.path()).is_err(), "a directory");
    }

    #[test]
    fn without_either_variable_there_is_no_profile_path() {
        assert_eq!(path_from(None, None), None);
        assert_eq!(path_from(None, os("")), None);
    }

    fn sample() -> Profile {
        Profile {
            version: PROFILE_VERSION,
            alpha_us: 0.08,
            beta_us: 0.15,
            gamma_us: 9000.0,
            beta_by_batch_us: [("32".to_string(), 0.38)].into_iter().collect(),
            transport_by_batch_us: [("32".to_string(), 0.3)].into_iter().collect(),
            batch: 341,
            machine: Machine::this(),
            created_unix_s: 1,
            other_work_cores: Some(0.1),
            wake_us: Some(35.0),
        }
    }

    #[test]
    fn a_saved_profile_loads_back_and_a_bad_one_is_refused() {
        let dir = std::env::temp_dir().join(format!("clasp-profile-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("a/b/profile.json");
        save(&path, &sample(), Parent::Create).expect("saved");
        assert_eq!(load(&path).expect("loaded"), sample());
        // Nothing but the profile is left in its directory.
        assert_eq!(
            std::fs::read_dir(path.parent().unwrap()).unwrap().count(),
            1
        );
        std::fs::write(&path, "{not json").unwrap();
        assert!(load(&path).is_err());
        let mut p = sample();
        p.version = 1;
        std::fs::write(&path, serde_json::to_string(&p).unwrap()).unwrap();
        assert!(load(&path).unwrap_err().contains("version 1"));
        let mut p = sample();
        p.gamma_us = -1.0;
        std::fs::write(&path, serde_json::to_string(&p).unwrap()).unwrap();
        assert!(load(&path).unwrap_err().contains("gamma_us"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Costs past the planner's bound on its inputs, or by-batch figures that are no costs,
    /// are refused: `alpha_us: 1e300` was read and printed 300-digit decisions.
    #[test]
    fn costs_out_of_bounds_are_refused_naming_the_field() {
        let refused = |edit: &dyn Fn(&mut Profile), field: &str| {
            let mut p = sample();
            edit(&mut p);
            let why = p.check().unwrap_err();
            assert!(why.contains(field), "{why}");
        };
        refused(&|p| p.alpha_us = 1e300, "alpha_us");
        refused(&|p| p.wake_us = Some(-3.0), "wake_us");
        refused(&|p| p.wake_us = Some(f64::NAN), "wake_us");
        refused(&|p| p.other_work_cores = Some(-3.0), "other_work_cores");
        let by_batch = |k: &str, v: f64| [(k.to_string(), v)].into_iter().collect();
        refused(
            &|p| p.beta_by_batch_us = by_batch("0", 1.0),
            "beta_by_batch_us",
        );
        refused(
            &|p| p.beta_by_batch_us = by_batch("32", -1.0),
            "beta_by_batch_us",
        );
        refused(
            &|p| p.transport_by_batch_us = by_batch("x", 1.0),
            "transport_by_batch_us",
        );
        let mut p = sample();
        p.alpha_us = 1e15;
        assert_eq!(p.check(), Ok(()), "at the bound");
    }

    /// A fresh directory for one test, named after it.
    fn temp_dir(test: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("clasp-profile-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_target_is_a_regular_file_or_a_free_name_in_a_directory_that_exists() {
        let dir = temp_dir("target");
        let file = dir.join("p.json");
        assert_eq!(target(&file, Parent::MustExist), Ok(file.clone()));
        std::fs::write(&file, "old").unwrap();
        assert_eq!(target(&file, Parent::MustExist), Ok(file.clone()));
        let err = target(&dir, Parent::MustExist).unwrap_err();
        assert_eq!(err, format!("{} is a directory", dir.display()));
        // A socket stands for every node a rename must not replace (devices, FIFOs).
        let socket = dir.join("socket");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        let err = target(&socket, Parent::Create).unwrap_err();
        assert_eq!(err, format!("{} is not a regular file", socket.display()));
        // A missing directory is made only for the default place.
        let missing = dir.join("no/p.json");
        let err = target(&missing, Parent::MustExist).unwrap_err();
        let no = dir.join("no");
        assert_eq!(
            err,
            format!("the directory {} does not exist", no.display())
        );
        assert_eq!(target(&missing, Parent::Create), Ok(missing.clone()));
        assert!(!no.exists());
        let under_a_file = file.join("p.json");
        let err = target(&under_a_file, Parent::Create).unwrap_err();
        assert_eq!(err, format!("{} is not a directory", file.display()));
        let trailing = PathBuf::from(format!("{}/", dir.join("new").display()));
        assert!(
            target(&trailing, Parent::MustExist)
                .unwrap_err()
                .ends_with("which names a directory")
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_link_is_followed_its_target_replaced_and_the_link_kept() {
        let dir = temp_dir("link");
        let file = dir.join("p.json");
        std::fs::write(&file, "old").unwrap();
        let link = dir.join("link.json");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        save(&link, &sample(), Parent::MustExist).expect("saved through the link");
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(load(&file).expect("the target holds the profile"), sample());
        // A link to what a rename must not replace is refused like it, naming both.
        let socket = dir.join("socket");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        let to_socket = dir.join("to-socket");
        std::os::unix::fs::symlink(&socket, &to_socket).unwrap();
        let err = target(&to_socket, Parent::MustExist).unwrap_err();
        assert!(
            err.contains("a link to") && err.ends_with("is not a regular file"),
            "{err}"
        );
        let dangling = dir.join("dangling");
        std::os::unix::fs::symlink(dir.join("nowhere"), &dangling).unwrap();
        let err = target(&dangling, Parent::Create).unwrap_err();
        assert!(err.contains("cannot be followed"), "{err}");
        assert!(!dir.join("nowhere").exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
