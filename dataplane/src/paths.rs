//! Whether two names are one file. Several checks ask it of paths as a user typed them: a sink
//! or an events file that would write over the input, a resume whose source is spelled
//! otherwise than the run's (`./in.txt`, a link). A file may not exist yet (a sink about to be
//! created), and may have two names (a hard link): both count.

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

/// Where `path` names a file, which need not exist yet: its directory resolved (links, `.`,
/// `..`), then the file itself if it exists (a link to another file).
pub fn resolved(path: &Path) -> Option<PathBuf> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let file = dir.canonicalize().ok()?.join(path.file_name()?);
    Some(file.canonicalize().unwrap_or(file))
}

/// Whether `a` and `b` name one file, which need not exist yet: equal as written, the same
/// resolved path, or one file under two names (a hard link: the same device and inode).
pub fn same_file(a: &Path, b: &Path) -> bool {
    let inode = |p: &Path| std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()));
    a == b
        || resolved(a).is_some_and(|p| resolved(b) == Some(p))
        || inode(a).is_some_and(|i| inode(b) == Some(i))
}

/// Whether file `path` is an entry of directory `dir`, as written or with both directories
/// resolved (the entry itself is not followed: a `dir:` entry may link to a file elsewhere).
pub fn entry_of(path: &Path, dir: &Path) -> bool {
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
    path.starts_with(dir)
        || parent.is_some_and(|p| {
            p.canonicalize()
                .is_ok_and(|p| dir.canonicalize().is_ok_and(|d| p.starts_with(d)))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_itself_under_a_link_a_hard_link_or_another_spelling() {
        let dir = tempfile::tempdir().unwrap();
        let name = |n: &str| dir.path().join(n);
        std::fs::write(name("a"), "x").unwrap();
        std::fs::hard_link(name("a"), name("b")).unwrap();
        std::fs::write(name("c"), "x").unwrap();
        std::os::unix::fs::symlink(name("a"), name("link")).unwrap();
        assert!(same_file(&name("a"), &name("b")));
        assert!(same_file(&name("a"), &name("link")));
        assert!(same_file(&name("a"), &dir.path().join(".").join("a")));
        assert!(!same_file(&name("a"), &name("c")));
        // Not there yet: one file by its resolved name only.
        assert!(same_file(&name("new"), &dir.path().join("./new")));
        assert!(!same_file(&name("a"), &name("missing")));
        assert!(entry_of(&name("a"), dir.path()));
        assert!(entry_of(&name("link"), &dir.path().join(".")));
        assert!(!entry_of(Path::new("/etc/passwd"), dir.path()));
    }
}
