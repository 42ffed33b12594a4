//! Sinks: where the app's outputs leave the system as text, one JSON line per output
//! (`clasp_operators::output_line`).
//!
//! The worker that executes an operator writes its outputs' lines: outputs never travel to the
//! driver, so a sink adds no network traffic and no driver CPU. Each executor formats lines
//! into its own buffer ([`SinkWriter`]) and hands it, in chunks of about [`SINK_CHUNK_BYTES`]
//! of whole lines, to the worker's one writer thread through a bounded queue; the thread writes
//! each chunk with one write call.
//!
//! * **Memory is bounded.** The executors' buffers, the queue and the chunk being written
//!   together hold at most about [`SINK_BUFFER_BYTES_MAX`] per worker (plus one line past a
//!   chunk's size). When the destination is slower than the outputs (a slow TCP reader), the
//!   queue fills and an executor that hands over a chunk waits: the executors slow down to
//!   the reader's pace (backpressure), memory does not grow.
//! * **Errors are clear and never hang.** A failed write (disk full, peer gone) is recorded
//!   with the sink's name; from then on the thread discards what it receives, so no executor
//!   waits forever; the executors report the error (the run fails naming the sink) and
//!   [`Sink::close`] returns it. A `tcp:` reader that takes nothing for
//!   [`target::TCP_WRITE_STALL`] is an error too.
//! * **One file on one host.** Workers that share a host append to one `file:PATH`
//!   (`O_APPEND`): each chunk is one `write(2)` of whole lines, which the kernel places at the
//!   end of the file as a unit, so lines of different workers never interleave (true for
//!   local file systems; not for NFS). Only a write cut short (a full disk) could leave part
//!   of a line, and that fails the run. Workers of a cluster file, which may run on several
//!   hosts, each write `PATH.w<ID>` on their own host instead.
//! * **Flushed at end of stream.** Executors hand over their buffers when they go idle, after
//!   each end-of-stream flush and when they stop; [`Sink::close`] waits for the writer to
//!   finish.
//! * **Written before a checkpoint counts.** A checkpoint's cut says every output before it
//!   was written: a recovery replays only what came after. So at a cut each executor hands
//!   over its buffer, and the worker's part is written only once the writer has written
//!   everything queued before it and synced a file to disk ([`SinkBarrier`]); a sink that
//!   failed fails the checkpoint instead. Without that, a checkpoint taken after a failed
//!   write would count lines that were discarded, and a run resumed from it would lose them.

mod path;
mod target;
#[cfg(test)]
mod tests;

pub use path::unusable as unusable_file;
pub use target::{SinkTarget, TCP_CONNECT_TIMEOUT, TCP_SEND_BUFFER_BYTES, TCP_WRITE_STALL};

use std::sync::mpsc::{Receiver, Sender, SyncSender, channel, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// Most bytes of lines a worker's sink holds in memory.
pub const SINK_BUFFER_BYTES_MAX: usize = 8 << 20;
/// An executor hands its lines to the writer once it holds this many bytes.
pub const SINK_CHUNK_BYTES: usize = 64 << 10;

/// A sink that cannot be opened or written.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// A `--sink` that does not parse.
    #[error("bad sink {0}")]
    Spec(String),
    /// An I/O error, naming the sink.
    #[error("sink {sink}: {what}: {source}")]
    Io {
        /// The sink as messages name it ([`SinkTarget::label`]).
        sink: String,
        /// What failed (open, connect, write, ...).
        what: &'static str,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The writer thread could not start.
    #[error("sink {0}: the writer thread did not start")]
    Thread(String),
}

/// What the writer thread is handed.
enum ToWriter {
    /// Whole lines to write.
    Lines(Vec<u8>),
    /// A barrier: answer once everything before it is written (a file synced to disk), or
    /// with the sink's error.
    Sync(Sender<Result<(), String>>),
}

struct Shared {
    /// The first error, as text (executors report it; `close` returns it).
    error: Mutex<Option<String>>,
}

impl Shared {
    fn error(&self) -> Option<String> {
        self.error.lock().map_or(None, |e| e.clone())
    }
}

/// One worker's sink: the writer thread and its queue (see the module docs).
pub struct Sink {
    tx: Option<SyncSender<ToWriter>>,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<Result<(), SinkError>>>,
    name: String,
    chunk: usize,
}

impl Sink {
    /// Opens `target` for a worker with `executors` executors, holding at most `buffer_bytes`
    /// (normally [`SINK_BUFFER_BYTES_MAX`]); `per_worker` as for [`SinkTarget`]'s files.
    pub fn open(
        target: &SinkTarget,
        per_worker: Option<u32>,
        executors: usize,
        buffer_bytes: usize,
    ) -> Result<Sink, SinkError> {
        Self::open_resumed(target, per_worker, false, executors, buffer_bytes)
    }

    /// [`Sink::open`] for a job restarted from a checkpoint (`resumed`): a worker's own file
    /// is appended to, not emptied, so the lines written before the restart stay.
    pub fn open_resumed(
        target: &SinkTarget,
        per_worker: Option<u32>,
        resumed: bool,
        executors: usize,
        buffer_bytes: usize,
    ) -> Result<Sink, SinkError> {
        let dest = target.open(per_worker, resumed)?;
        let chunk = chunk_bytes(buffer_bytes, executors);
        // Executors' buffers and the chunk being written take `executors + 1` chunks.
        let queued = (buffer_bytes / chunk).saturating_sub(executors + 1).max(1);
        let (tx, rx) = sync_channel::<ToWriter>(queued);
        let shared = Arc::new(Shared {
            error: Mutex::new(None),
        });
        let (t, s) = (target.clone(), Arc::clone(&shared));
        let thread = std::thread::Builder::new()
            .name("clasp-sink".into())
            .spawn(move || write_loop(&t, dest, &rx, &s))
            .map_err(|_| SinkError::Thread(target.to_string()))?;
        Ok(Sink {
            tx: Some(tx),
            shared,
            thread: Some(thread),
            name: target.to_string(),
            chunk,
        })
    }

    /// A writer for one executor.
    pub fn writer(&self) -> SinkWriter {
        SinkWriter {
            tx: self.tx.clone(),
            shared: Arc::clone(&self.shared),
            buf: Vec::new(),
            chunk: self.chunk,
            reported: false,
        }
    }

    /// A barrier behind everything handed over so far (module docs); hold it only while
    /// waiting on it: the writer ends once every handle to its queue is gone.
    pub fn barrier(&self) -> SinkBarrier {
        SinkBarrier {
            tx: self.tx.clone(),
            name: self.name.clone(),
        }
    }

    /// The sink as given (`file:PATH`, ...).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Waits until everything handed over is written (call after every writer flushed and
    /// dropped) and ends the stream; the first error if any write failed.
    pub fn close(mut self) -> Result<(), SinkError> {
        self.tx = None;
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(r)) => r,
            Some(Err(_)) | None => Err(SinkError::Thread(self.name.clone())),
        }
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Bytes per chunk: [`SINK_CHUNK_BYTES`], smaller when a small buffer must still hold the
/// executors' chunks and two in the queue.
fn chunk_bytes(buffer_bytes: usize, executors: usize) -> usize {
    (buffer_bytes / (executors + 3)).clamp(64, SINK_CHUNK_BYTES)
}

/// Waits until a sink has written everything handed to it before the barrier was taken.
pub struct SinkBarrier {
    tx: Option<SyncSender<ToWriter>>,
    name: String,
}

impl SinkBarrier {
    /// Blocks until the writer passed the barrier (a file's data synced to disk); the sink's
    /// error if a write failed, or if the writer is gone.
    pub fn wait(self) -> Result<(), String> {
        let gone = || format!("sink {}: its writer has stopped", self.name);
        let tx = self.tx.as_ref().ok_or_else(gone)?;
        let (reply, answer) = channel();
        tx.send(ToWriter::Sync(reply)).map_err(|_| gone())?;
        answer.recv().map_err(|_| gone())?
    }
}

/// The writer thread: writes chunks until every sender is gone; after an error, discards.
fn write_loop(
    target: &SinkTarget,
    mut dest: target::Destination,
    rx: &Receiver<ToWriter>,
    shared: &Shared,
) -> Result<(), SinkError> {
    let mut failed: Option<SinkError> = None;
    for message in rx {
        let chunk = match message {
            ToWriter::Lines(chunk) => chunk,
            ToWriter::Sync(reply) => {
                let synced = match &failed {
                    Some(e) => Err(e.to_string()),
                    None => dest.sync().map_err(|e| target.io("sync", e).to_string()),
                };
                let _ = reply.send(synced);
                continue;
            }
        };
        if failed.is_some() {
            continue;
        }
        if let Err(e) = dest.write_lines(&chunk) {
            let e = target.io("write", e);
            if let Ok(mut slot) = shared.error.lock() {
                *slot = Some(e.to_string());
            }
            failed = Some(e);
        }
    }
    match failed {
        Some(e) => Err(e),
        None => dest.finish().map_err(|e| target.io("finish", e)),
    }
}

/// An executor's side of a sink: a buffer of whole lines handed to the writer in chunks.
pub struct SinkWriter {
    tx: Option<SyncSender<ToWriter>>,
    shared: Arc<Shared>,
    buf: Vec<u8>,
    chunk: usize,
    reported: bool,
}

impl SinkWriter {
    /// The buffer to append whole lines to; call [`SinkWriter::lines_added`] after.
    #[inline]
    pub fn buffer(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

    /// Hands the buffer over once it holds a chunk (waiting while the queue is full).
    #[inline]
    pub fn lines_added(&mut self) -> Result<(), String> {
        if self.buf.len() >= self.chunk {
            self.flush()
        } else {
            Ok(())
        }
    }

    /// Hands over whatever is buffered (waiting while the queue is full). The sink's error, once,
    /// if it failed.
    pub fn flush(&mut self) -> Result<(), String> {
        if !self.buf.is_empty()
            && let Some(tx) = &self.tx
        {
            let chunk = std::mem::replace(&mut self.buf, Vec::with_capacity(self.chunk));
            if tx.send(ToWriter::Lines(chunk)).is_err() {
                self.tx = None;
            }
        }
        match self.shared.error() {
            Some(e) if !self.reported => {
                self.reported = true;
                Err(e)
            }
            _ => Ok(()),
        }
    }
}
