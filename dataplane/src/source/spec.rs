//! The text form of a source, `KIND:ARGUMENT`, as `--source` takes it.

use super::SourceError;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// Where a run's records come from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum SourceSpec {
    /// The app's seeded generator (`gen:`, or no `--source`).
    #[default]
    Generator,
    /// One record per line of a file, the newline stripped (`file:PATH`).
    File(PathBuf),
    /// Length-prefixed records: a `u32` little-endian byte count, then that many bytes
    /// (`lenprefix:PATH`).
    LenPrefix(PathBuf),
    /// Every regular file of a directory, in name order, one record per line (`dir:PATH`).
    Dir(PathBuf),
    /// Standard input, one record per line (`stdin:`).
    Stdin,
    /// TCP connections accepted on an address, one record per line (`tcp:ADDR`).
    Tcp(SocketAddr),
}

impl SourceSpec {
    /// Whether records are generated rather than read.
    pub fn is_generator(&self) -> bool {
        *self == SourceSpec::Generator
    }

    /// Whether the records can be read again from the start (a run restarted from a
    /// checkpoint replays them): generated records and regular files' can, streams' cannot —
    /// a pipe or a device named as a file included, and a file whose size reads 0 (most of
    /// `/proc`), which is read as a stream is.
    pub fn is_replayable(&self) -> bool {
        match self {
            SourceSpec::Stdin | SourceSpec::Tcp(_) => false,
            SourceSpec::File(p) | SourceSpec::LenPrefix(p) => is_sized_file(p),
            SourceSpec::Generator | SourceSpec::Dir(_) => true,
        }
    }

    /// Checks what can be checked before a run starts: a file or directory can be opened, an
    /// address can be listened on. A file that is a pipe or a device is not opened here (the
    /// open of a FIFO waits for its writer, and a second reader's open and close would lose
    /// what the writer wrote meanwhile): that it may be read is all that is checked.
    pub fn check(&self) -> Result<(), SourceError> {
        match self {
            SourceSpec::File(p) | SourceSpec::LenPrefix(p) => check_file(p),
            SourceSpec::Dir(p) => std::fs::read_dir(p)
                .map(drop)
                .map_err(|e| SourceError::io(looked_up(p), e)),
            SourceSpec::Tcp(a) => std::net::TcpListener::bind(a)
                .map(drop)
                .map_err(|e| SourceError::io(a, e)),
            SourceSpec::Generator | SourceSpec::Stdin => Ok(()),
        }
    }
}

/// `path` as an error names it: a relative one with the directory it was looked for in (a
/// path from an app file's `[run]` table is relative to where the command runs, not to the
/// app file).
fn looked_up(path: &Path) -> String {
    match std::env::current_dir() {
        Ok(cwd) if path.is_relative() => format!("{} (in {})", path.display(), cwd.display()),
        _ => path.display().to_string(),
    }
}

/// Whether `path` names a regular file (links followed): one whose size says where it ends.
/// A regular file whose size says what it holds (not 0).
fn is_sized_file(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() > 0)
}

/// A file source's path exists, is no directory, and may be read.
fn check_file(path: &Path) -> Result<(), SourceError> {
    let err = |e| SourceError::io(looked_up(path), e);
    let meta = std::fs::metadata(path).map_err(err)?;
    if meta.is_dir() {
        return Err(err(std::io::Error::new(
            std::io::ErrorKind::IsADirectory,
            "a directory (dir:PATH reads its files)",
        )));
    }
    if meta.is_file() {
        return std::fs::File::open(path).map(drop).map_err(err);
    }
    rustix::fs::access(path, rustix::fs::Access::READ_OK).map_err(|e| err(e.into()))
}

impl FromStr for SourceSpec {
    type Err = SourceError;

    fn from_str(s: &str) -> Result<Self, SourceError> {
        let bad = |reason: &str| SourceError::Spec {
            spec: s.to_string(),
            reason: reason.to_string(),
        };
        let (kind, arg) = s.split_once(':').ok_or_else(|| {
            bad("expected KIND:ARGUMENT (file:PATH, lenprefix:PATH, dir:PATH, stdin:, tcp:ADDR, gen:)")
        })?;
        let path = || {
            if arg.is_empty() {
                Err(bad("the path is empty"))
            } else {
                Ok(PathBuf::from(arg))
            }
        };
        let none = |spec: SourceSpec| {
            if arg.is_empty() {
                Ok(spec)
            } else {
                Err(bad("this kind takes no argument"))
            }
        };
        match kind {
            "gen" => none(SourceSpec::Generator),
            "stdin" => none(SourceSpec::Stdin),
            "file" => Ok(SourceSpec::File(path()?)),
            "lenprefix" => Ok(SourceSpec::LenPrefix(path()?)),
            "dir" => Ok(SourceSpec::Dir(path()?)),
            "tcp" => match arg.parse::<SocketAddr>() {
                // The system would pick a port that no producer is told of.
                Ok(a) if a.port() == 0 => Err(bad(
                    "port 0: give the port producers connect to, e.g. tcp:127.0.0.1:9000",
                )),
                Ok(a) => Ok(SourceSpec::Tcp(a)),
                Err(_) => Err(bad(
                    "expected an IP address and port, e.g. tcp:127.0.0.1:9000",
                )),
            },
            _ => Err(bad(
                "unknown kind (file, lenprefix, dir, stdin, tcp or gen)",
            )),
        }
    }
}

impl fmt::Display for SourceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SourceSpec::Generator => write!(f, "gen:"),
            SourceSpec::File(p) => write!(f, "file:{}", p.display()),
            SourceSpec::LenPrefix(p) => write!(f, "lenprefix:{}", p.display()),
            SourceSpec::Dir(p) => write!(f, "dir:{}", p.display()),
            SourceSpec::Stdin => write!(f, "stdin:"),
            SourceSpec::Tcp(a) => write!(f, "tcp:{a}"),
        }
    }
}
