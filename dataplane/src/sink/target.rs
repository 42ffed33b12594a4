//! Where a sink writes: `file:PATH`, `stdout:` or `tcp:ADDR`, parsed from the command line
//! (and carried to cluster workers in the job as the same text), and opened by each worker.

use std::fmt;
use std::fs::OpenOptions;
use std::io::Write;
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

use super::SinkError;

/// How long a worker tries to connect to a `tcp:` sink's reader.
pub const TCP_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// A `tcp:` reader that takes nothing for this long fails the sink (a slow reader is waited
/// for; one that stopped reading is an error, never a hang).
pub const TCP_WRITE_STALL: Duration = Duration::from_secs(30);
/// A `tcp:` sink's send waits at most this long before the writer looks at how long the
/// reader has taken nothing ([`TCP_WRITE_STALL`]): a blocking send of a whole chunk would
/// return only when all of it is sent, or partly sent once its timeout passes, so a reader
/// that takes a few bytes now and then would hold it for several timeouts.
pub(super) const TCP_SEND_WAIT: Duration = Duration::from_secs(1);
/// The kernel's send buffer of a `tcp:` sink, fixed (not autotuned up to `tcp_wmem`'s
/// maximum, several MiB): what waits for a slow reader stays in the sink's own bounded buffer.
/// 256 KiB keeps a link with a 1 ms round trip at 250 MB/s.
pub const TCP_SEND_BUFFER_BYTES: usize = 256 << 10;

/// A sink's destination (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SinkTarget {
    /// A file: on one host shared by every worker (appended to in whole lines), on several
    /// hosts `PATH.w<ID>` per worker ([`SinkTarget::open`]).
    File(PathBuf),
    /// The process's standard output.
    Stdout,
    /// A TCP connection each worker opens to a reader listening at this address.
    Tcp(String),
}

impl SinkTarget {
    /// Parses `file:PATH`, `stdout:` or `tcp:HOST:PORT`.
    pub fn parse(text: &str) -> Result<SinkTarget, SinkError> {
        let bad = |why: &str| SinkError::Spec(format!("`{text}`: {why}"));
        let (scheme, rest) = text
            .split_once(':')
            .ok_or_else(|| bad("expected file:PATH, stdout: or tcp:ADDR"))?;
        match scheme {
            "file" if rest.is_empty() => Err(bad("file: needs a path")),
            "file" => Ok(SinkTarget::File(PathBuf::from(rest))),
            "stdout" if rest.is_empty() => Ok(SinkTarget::Stdout),
            "stdout" => Err(bad("stdout: takes nothing after the colon")),
            "tcp"
                if rest
                    .rsplit_once(':')
                    .is_none_or(|(h, p)| h.is_empty() || p.is_empty()) =>
            {
                Err(bad("tcp: needs HOST:PORT"))
            }
            "tcp" => Ok(SinkTarget::Tcp(rest.to_owned())),
            _ => Err(bad("unknown kind (expected file:, stdout: or tcp:)")),
        }
    }

    /// The path a `file:` sink of worker `worker` writes: `PATH` when the workers share one
    /// host, `PATH.w<ID>` when each writes on its own host.
    pub fn file_path(path: &std::path::Path, worker: Option<u32>) -> PathBuf {
        match worker {
            None => path.to_path_buf(),
            Some(id) => {
                let mut p = path.as_os_str().to_owned();
                p.push(format!(".w{id}"));
                PathBuf::from(p)
            }
        }
    }

    /// Empties (or creates) the file of a `file:` sink shared by the workers of one host, before
    /// any of them starts appending: done once, by whoever starts the workers.
    pub fn truncate_shared(&self) -> Result<(), SinkError> {
        if let SinkTarget::File(path) = self {
            self.usable(path)?;
            std::fs::File::create(path).map_err(|e| self.io("create", e))?;
        }
        Ok(())
    }

    /// Opens the destination for a worker: `per_worker` is `Some(id)` when each worker writes
    /// its own file (`PATH.w<ID>`, created or emptied here; appended to with `resumed`: a job
    /// restarted from a checkpoint continues it), `None` when the workers of this host append
    /// to one (see [`super::Sink`] on why whole-line appends do not interleave).
    pub(super) fn open(
        &self,
        per_worker: Option<u32>,
        resumed: bool,
    ) -> Result<Destination, SinkError> {
        match self {
            SinkTarget::File(path) => {
                let path = Self::file_path(path, per_worker);
                self.usable(&path)?;
                let mut o = OpenOptions::new();
                match per_worker {
                    Some(_) if !resumed => o.write(true).create(true).truncate(true),
                    _ => o.append(true).create(true),
                };
                let f = o.open(&path).map_err(|e| self.io("open", e))?;
                Ok(Destination::File(f))
            }
            SinkTarget::Stdout => Ok(Destination::Stdout(std::io::stdout())),
            SinkTarget::Tcp(addr) => {
                let s = self.connect(addr)?;
                s.set_write_timeout(Some(TCP_SEND_WAIT))
                    .map_err(|e| self.io("configure", e))?;
                rustix::net::sockopt::set_socket_send_buffer_size(&s, TCP_SEND_BUFFER_BYTES)
                    .map_err(|e| self.io("configure", e.into()))?;
                Ok(Destination::Tcp(s))
            }
        }
    }

    /// An error when `path` is no file a sink can write (`super::path`): opening a FIFO
    /// would wait for a reader, possibly for ever.
    fn usable(&self, path: &std::path::Path) -> Result<(), SinkError> {
        match super::path::unusable(path) {
            Some(why) => Err(self.io("open", std::io::Error::other(why))),
            None => Ok(()),
        }
    }

    fn connect(&self, addr: &str) -> Result<TcpStream, SinkError> {
        let addrs: Vec<SocketAddr> = addr
            .to_socket_addrs()
            .map_err(|e| self.io("resolve", e))?
            .collect();
        let mut last = None;
        for a in addrs {
            match TcpStream::connect_timeout(&a, TCP_CONNECT_TIMEOUT) {
                Ok(s) => return Ok(s),
                Err(e) => last = Some(e),
            }
        }
        Err(self.io(
            "connect",
            last.unwrap_or_else(|| std::io::Error::other("no address")),
        ))
    }

    /// An I/O error of this sink, naming it and what failed.
    pub(super) fn io(&self, what: &'static str, source: std::io::Error) -> SinkError {
        SinkError::Io {
            sink: self.label(),
            what,
            source,
        }
    }
}

impl SinkTarget {
    /// Whether writing this sink would write over `source`'s input: a `file:` sink that is
    /// the source's file, or a file in the source's directory (read again as input).
    pub fn overwrites(&self, source: &crate::source::SourceSpec) -> bool {
        use crate::source::SourceSpec;
        let SinkTarget::File(sink) = self else {
            return false;
        };
        // The sink need not exist yet: its directory does, or it cannot be opened anyway.
        let (Some(parent), Some(name)) = (sink.parent(), sink.file_name()) else {
            return false;
        };
        let parent = if parent.as_os_str().is_empty() {
            std::path::Path::new(".")
        } else {
            parent
        };
        let Ok(parent) = parent.canonicalize() else {
            return false;
        };
        let sink = parent.join(name);
        let sink = sink.canonicalize().unwrap_or(sink);
        // One file under two names (a hard link) too.
        let same = |p: &std::path::Path| crate::paths::same_file(p, &sink);
        match source {
            SourceSpec::File(p) | SourceSpec::LenPrefix(p) => same(p),
            // A `dir:` source reads the files directly in it.
            SourceSpec::Dir(d) => {
                d.canonicalize()
                    .is_ok_and(|d| sink.parent() == Some(d.as_path()))
                    || std::fs::read_dir(d)
                        .into_iter()
                        .flatten()
                        .flatten()
                        .any(|e| same(&e.path()))
            }
            _ => false,
        }
    }
}

impl SinkTarget {
    /// The sink as a message names it before a colon: as given, but `stdout` for `stdout:`
    /// (not `sink stdout:: write`).
    pub fn label(&self) -> String {
        match self {
            SinkTarget::Stdout => "stdout".into(),
            other => other.to_string(),
        }
    }
}

impl fmt::Display for SinkTarget {
    /// The text [`SinkTarget::parse`] reads.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SinkTarget::File(p) => write!(f, "file:{}", p.display()),
            SinkTarget::Stdout => f.write_str("stdout:"),
            SinkTarget::Tcp(a) => write!(f, "tcp:{a}"),
        }
    }
}

/// An open destination.
pub(super) enum Destination {
    File(std::fs::File),
    Stdout(std::io::Stdout),
    Tcp(TcpStream),
}

/// Longest write to standard output that a pipe keeps whole (`PIPE_BUF` on Linux): every
/// worker of a run may share the pipe, so writes to it hold whole lines and stay under this.
const PIPE_ATOMIC_BYTES: usize = 4096;

impl Destination {
    /// Writes whole lines `chunk` (ends with a newline).
    pub(super) fn write_lines(&mut self, chunk: &[u8]) -> std::io::Result<()> {
        match self {
            // One write(2) per chunk: with O_APPEND the kernel places it at the end of the
            // file as one unit, so the chunks of several workers do not interleave.
            Destination::File(f) => f.write_all(chunk),
            Destination::Tcp(s) => write_tcp(s, chunk, TCP_WRITE_STALL),
            Destination::Stdout(out) => {
                let mut out = out.lock();
                for piece in whole_line_pieces(chunk, PIPE_ATOMIC_BYTES) {
                    out.write_all(piece)?;
                    out.flush()?;
                }
                Ok(())
            }
        }
    }

    /// Makes what was written durable: a regular file's data synced to disk (a checkpoint
    /// counts on it); a stream's buffer flushed. A character device (`/dev/null`, a terminal)
    /// holds nothing to sync (`fdatasync` refuses it with EINVAL).
    pub(super) fn sync(&mut self) -> std::io::Result<()> {
        match self {
            Destination::File(f) if f.metadata().is_ok_and(|m| m.is_file()) => f.sync_data(),
            Destination::File(f) => f.flush(),
            Destination::Stdout(out) => out.flush(),
            Destination::Tcp(s) => s.flush(),
        }
    }

    /// Ends the stream (a TCP reader sees end of file after the last line).
    pub(super) fn finish(&mut self) -> std::io::Result<()> {
        match self {
            Destination::File(f) => f.flush(),
            Destination::Stdout(out) => out.flush(),
            Destination::Tcp(s) => {
                s.flush()?;
                s.shutdown(std::net::Shutdown::Write)
            }
        }
    }
}

/// Writes all of `chunk`; an error once nothing was sent for `stall` ([`TCP_WRITE_STALL`]).
/// The stream's write timeout must be set (to [`TCP_SEND_WAIT`]).
pub(super) fn write_tcp(s: &mut TcpStream, chunk: &[u8], stall: Duration) -> std::io::Result<()> {
    use std::io::ErrorKind;
    let mut rest = chunk;
    let mut progress = std::time::Instant::now();
    while !rest.is_empty() {
        match s.write(rest) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => {
                rest = &rest[n..];
                progress = std::time::Instant::now();
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                if progress.elapsed() >= stall {
                    return Err(std::io::Error::new(
                        ErrorKind::TimedOut,
                        format!("the reader took nothing for {} s", stall.as_secs()),
                    ));
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Splits `chunk` into pieces of whole lines of at most `max` bytes (a longer line is a piece
/// of its own).
pub(super) fn whole_line_pieces(chunk: &[u8], max: usize) -> impl Iterator<Item = &[u8]> {
    let mut rest = chunk;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let window = &rest[..rest.len().min(max)];
        let end = match window.iter().rposition(|&b| b == b'\n') {
            Some(i) if window.len() < rest.len() => i + 1,
            _ if window.len() == rest.len() => rest.len(),
            _ => rest
                .iter()
                .position(|&b| b == b'\n')
                .map_or(rest.len(), |i| i + 1),
        };
        let (piece, tail) = rest.split_at(end);
        rest = tail;
        Some(piece)
    })
}
