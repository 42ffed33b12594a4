//! The reader thread of each kind of source: what it opens before the run (so that a missing
//! file or a busy address is an error at once) and how it reads.

use super::feed::Batcher;
use super::share::{Part, Share, first_line_at, parts};
use super::split::{read_length_prefixed, read_lines};
use super::{SourceError, SourceSpec};
use std::fs::File;
use std::io::{self, BufReader, Read};
use std::net::TcpListener;
use std::path::PathBuf;

/// Bytes a reader asks the kernel for at a time.
const READ_BUFFER_BYTES: usize = 64 << 10;
/// The receive buffer of a TCP source's connections. Fixed (the kernel's autotuning would grow
/// it to tens of MiB), so that when the cluster does not keep up a client is slowed after
/// little more than this is buffered.
const TCP_RECEIVE_BUFFER_BYTES: usize = 256 << 10;

/// A source opened, ready for its reader thread.
pub(super) enum Opened {
    /// Parts of files read one after another, one record per line (the source's files, and
    /// the parts this reader reads).
    Lines(Vec<PathBuf>, Vec<Part>),
    /// One file of length-prefixed records.
    LengthPrefixed(PathBuf),
    /// Standard input.
    Stdin,
    /// A listening socket.
    Tcp(TcpListener),
}

impl Opened {
    /// Opens `share` of `spec`: a directory is listed (its regular files, in name order), a
    /// socket bound.
    pub(super) fn open(spec: &SourceSpec, share: Share) -> Result<Opened, SourceError> {
        let lines = |files: Vec<PathBuf>, split_bytes: bool| {
            let parts = parts(&files, share, split_bytes)
                .map_err(|e| SourceError::io(spec.to_string(), e))?;
            Ok(Opened::Lines(files, parts))
        };
        if !share.reads_unsplit() && !matches!(spec, SourceSpec::File(_) | SourceSpec::Dir(_)) {
            return Ok(Opened::Lines(Vec::new(), Vec::new()));
        }
        Ok(match spec {
            SourceSpec::Generator => {
                return Err(SourceError::Spec {
                    spec: spec.to_string(),
                    reason: "the generator is not read".into(),
                });
            }
            SourceSpec::File(p) => {
                spec.check()?;
                lines(vec![p.clone()], true)?
            }
            SourceSpec::LenPrefix(p) => {
                spec.check()?;
                Opened::LengthPrefixed(p.clone())
            }
            SourceSpec::Dir(d) => lines(list_files(d)?, false)?,
            SourceSpec::Stdin => Opened::Stdin,
            SourceSpec::Tcp(addr) => {
                let listener = TcpListener::bind(addr).map_err(|e| SourceError::io(addr, e))?;
                // Accepted connections inherit it.
                rustix::net::sockopt::set_socket_recv_buffer_size(
                    &listener,
                    TCP_RECEIVE_BUFFER_BYTES,
                )
                .map_err(|e| SourceError::io(addr, e.into()))?;
                Opened::Tcp(listener)
            }
        })
    }

    /// The files' paths, by index (empty for streams).
    pub(super) fn paths(&self) -> Vec<String> {
        match self {
            Opened::Lines(files, _) => files.iter().map(|p| p.display().to_string()).collect(),
            Opened::LengthPrefixed(p) => vec![p.display().to_string()],
            Opened::Stdin | Opened::Tcp(_) => Vec::new(),
        }
    }

    /// Reads the source to its end (or until the ingress is gone), then hands on the last
    /// batch; an error ends the stream after the records read before it.
    pub(super) fn read(self, mut out: Batcher) {
        let result = match self {
            Opened::Lines(files, parts) => read_files(&files, &parts, &mut out),
            Opened::LengthPrefixed(p) => open_file(&p)
                .and_then(|mut f| read_length_prefixed(&mut f, &mut out).map_err(|e| io_at(&p, e))),
            Opened::Stdin => {
                read_lines(&mut buffered(io::stdin()), 0, u64::MAX, &mut out, |_| None)
                    .map_err(|e| SourceError::io("standard input", e))
            }
            Opened::Tcp(listener) => read_connections(&listener, &mut out),
        };
        match result {
            Ok(_) => {
                out.flush();
            }
            Err(e) => out.fail(e),
        }
    }
}

/// The regular files of `dir` (links followed), in name order.
fn list_files(dir: &PathBuf) -> Result<Vec<PathBuf>, SourceError> {
    let io_err = |e| SourceError::io(dir.display(), e);
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io_err)? {
        let path = entry.map_err(io_err)?.path();
        if std::fs::metadata(&path).is_ok_and(|m| m.is_file()) {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

fn buffered<R: Read>(r: R) -> BufReader<R> {
    BufReader::with_capacity(READ_BUFFER_BYTES, r)
}

fn io_at(path: &std::path::Path, e: io::Error) -> SourceError {
    SourceError::io(path.display(), e)
}

fn open_file(path: &std::path::Path) -> Result<BufReader<File>, SourceError> {
    File::open(path).map(buffered).map_err(|e| io_at(path, e))
}

/// The lines of every part, part after part.
fn read_files(files: &[PathBuf], parts: &[Part], out: &mut Batcher) -> Result<bool, SourceError> {
    for part in parts {
        let path = &files[part.file_index as usize];
        out.file_index = part.file_index;
        let file = File::open(path).map_err(|e| io_at(path, e))?;
        let end = part.range.end;
        // The bytes it held: a `file:` as its parts were cut when the run started; a `dir:`
        // file, read to its end, as opened (0: a pipe or a device, never found shorter).
        let held_bytes = if end == u64::MAX {
            file.metadata()
                .map_or(0, |m| if m.is_file() { m.len() } else { 0 })
        } else {
            end
        };
        let (mut f, at) =
            first_line_at(file, part.range.start, READ_BUFFER_BYTES).map_err(|e| io_at(path, e))?;
        // Its end reached before those bytes, and shorter now: it was truncated while read.
        let shrank = |at_bytes: u64| {
            let shorter = at_bytes < held_bytes
                && std::fs::metadata(path).is_ok_and(|m| m.len() < held_bytes);
            shorter.then_some(held_bytes)
        };
        if !read_lines(&mut f, at, end, out, shrank).map_err(|e| io_at(path, e))? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The lines of every connection accepted, one connection after another: the stream ends
/// when a connection closes and no other is waiting. A connection that fails (a reset) ends
/// that connection, not the stream, and one that closes without sending a byte (a port scan, a
/// health check) does not count: the stream waits on for its input as if it never came.
fn read_connections(listener: &TcpListener, out: &mut Batcher) -> Result<bool, SourceError> {
    let local = listener
        .local_addr()
        .map_or_else(|_| "the TCP source".to_string(), |a| a.to_string());
    let mut first = true;
    loop {
        listener
            .set_nonblocking(!first)
            .map_err(|e| SourceError::io(&local, e))?;
        let stream = match listener.accept() {
            Ok((stream, _)) => stream,
            Err(e) if !first && e.kind() == io::ErrorKind::WouldBlock => return Ok(true),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(SourceError::io(&local, e)),
        };
        let peer = stream
            .peer_addr()
            .map_or_else(|_| "?".to_string(), |a| a.to_string());
        let _ = stream.set_nonblocking(false);
        let mut counted = Counted {
            inner: stream,
            bytes: 0,
        };
        match read_lines(&mut buffered(&mut counted), 0, u64::MAX, out, |_| None) {
            Ok(true) => {}
            Ok(false) => return Ok(false),
            Err(e) => tracing::warn!("source tcp:{local}: the connection from {peer} failed: {e}"),
        }
        if counted.bytes == 0 {
            tracing::info!("source tcp:{local}: {peer} connected and sent nothing; ignored");
        } else {
            first = false;
        }
    }
}

/// A reader that counts the bytes read through it.
struct Counted<R> {
    inner: R,
    bytes: u64,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }
}
