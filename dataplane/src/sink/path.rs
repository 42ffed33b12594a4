//! Which paths a `file:` sink may name.
//!
//! Every worker of a run opens the sink itself, after whoever started the workers emptied it,
//! so some files that take writes are still no sink: a FIFO (its reader sees the end when the
//! driver closes it after emptying it, and a worker's open then waits for a reader for ever), a
//! socket, a directory, and a name for a descriptor of the opening process (`/dev/stdout`,
//! `/proc/self/fd/1`: a worker's descriptor 1 is not the terminal or pipe of the command the
//! user typed). And a file that is the source's input under another name (a hard link) would
//! be emptied before it is read.

use std::os::unix::fs::FileTypeExt as _;
use std::path::{Path, PathBuf};

/// The most symbolic links followed when looking for a descriptor's name (the kernel's
/// `MAXSYMLINKS`).
const MAX_LINKS: usize = 40;

/// Why `path` cannot be a `file:` sink, if it cannot.
pub fn unusable(path: &Path) -> Option<String> {
    if names_a_descriptor(path) {
        return Some(
            "names a file descriptor of the process that opens it (each worker's own, not this \
             command's): use stdout:"
                .into(),
        );
    }
    if in_kernel_tree(path) {
        return Some(
            "is in /proc or /sys: a kernel interface, not a file lines can be written to".into(),
        );
    }
    let kind = std::fs::metadata(path).ok()?.file_type();
    if kind.is_dir() {
        Some("is a directory".into())
    } else if kind.is_fifo() {
        Some(
            "is a FIFO: every worker opens the sink after it was emptied, so a reader would see \
             its end before the first line; use tcp: or stdout:"
                .into(),
        )
    } else if kind.is_socket() {
        Some("is a socket: use tcp:".into())
    } else {
        None
    }
}

/// Whether `path`, or a symbolic link on the way from it, is an entry of a `/proc/*/fd`
/// directory (`/dev/stdout`, `/dev/fd/N`, `/proc/self/fd/N`, `/proc/thread-self/fd/N`).
fn names_a_descriptor(path: &Path) -> bool {
    let mut at = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        if in_descriptor_dir(&at) {
            return true;
        }
        let Ok(next) = std::fs::read_link(&at) else {
            return false;
        };
        // A relative link is relative to the link's directory; `join` keeps an absolute one.
        at = at
            .parent()
            .map_or_else(|| next.clone(), |dir| dir.join(&next));
    }
    false
}

/// Whether `path` (its directory followed where it leads) is under `/proc` or `/sys`, whose
/// files take writes as commands or refuse them (`/proc/version` failed the run's first write,
/// after the whole input).
fn in_kernel_tree(path: &Path) -> bool {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    let dir = dir.map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    let dir = dir.canonicalize().unwrap_or(dir);
    dir.starts_with("/proc") || dir.starts_with("/sys")
}

/// Whether `path`'s directory is a process's (or thread's) descriptor directory.
fn in_descriptor_dir(path: &Path) -> bool {
    let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) else {
        return false;
    };
    let dir = dir.canonicalize().unwrap_or_else(|_| PathBuf::from(dir));
    dir.starts_with("/proc") && dir.file_name().is_some_and(|n| n == "fd")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptor_names_fifos_sockets_and_directories_are_no_sink() {
        for name in ["/dev/stdout", "/dev/stderr", "/dev/fd/1", "/proc/self/fd/2"] {
            let why = unusable(Path::new(name)).unwrap_or_default();
            assert!(why.contains("use stdout:"), "{name}: {why:?}");
        }
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(unusable(dir.path()).as_deref(), Some("is a directory"));
        let fifo = dir.path().join("fifo");
        let rw = rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR;
        rustix::fs::mkfifoat(rustix::fs::CWD, &fifo, rw).unwrap();
        assert!(unusable(&fifo).is_some_and(|w| w.starts_with("is a FIFO")));
        let socket = dir.path().join("socket");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        assert!(unusable(&socket).is_some_and(|w| w.starts_with("is a socket")));
        // What a sink may be: a regular file, a new name, a character device.
        let file = dir.path().join("out.jsonl");
        assert_eq!(unusable(&file), None);
        std::fs::write(&file, "").unwrap();
        assert_eq!(unusable(&file), None);
        assert_eq!(unusable(Path::new("/dev/null")), None);
        // A link to a descriptor's name is one too.
        let link = dir.path().join("to-stdout");
        std::os::unix::fs::symlink("/dev/stdout", &link).unwrap();
        assert!(unusable(&link).is_some_and(|w| w.contains("use stdout:")));
    }
}
