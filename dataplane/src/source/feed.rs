//! The queue between a source's reader thread and the ingress: the reader fills batches
//! ([`Batcher`]) and blocks while [`BATCHES_QUEUED`] wait; the ingress takes one record at a
//! time ([`SourceFeed::poll`]) and never blocks on the source.

use super::offset::{FilePosition, SourceOffset, SourceReport};
use super::reader::Opened;
use super::share::Share;
use super::{BATCH_BYTES, BATCH_ITEMS, BATCHES_QUEUED, SourceError, SourceSpec};
use std::collections::BTreeMap;
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, sync_channel};

/// One item read: a record's bytes in the batch's data, or bad data skipped.
enum Item {
    Record { start: usize, end: usize },
    Malformed(&'static str),
}

/// Records read together, each with the file and byte offset just past it.
#[derive(Default)]
pub(super) struct Batch {
    data: Vec<u8>,
    items: Vec<(Item, u32, u64)>,
}

/// What the reader thread sends.
pub(super) type Sent = Result<Batch, SourceError>;

/// The reader's side: collects records into batches and hands them to the ingress.
pub(super) struct Batcher {
    tx: SyncSender<Sent>,
    batch: Batch,
    /// The file being read (its index in the source's files).
    pub(super) file_index: u32,
}

impl Batcher {
    /// A record ending `end_offset` bytes into the current file; `false`: the ingress is gone.
    pub(super) fn record(&mut self, bytes: &[u8], end_offset: u64) -> bool {
        let start = self.batch.data.len();
        self.batch.data.extend_from_slice(bytes);
        let item = Item::Record {
            start,
            end: self.batch.data.len(),
        };
        self.batch.items.push((item, self.file_index, end_offset));
        self.flush_if_full()
    }

    /// Bad data skipped, ending `end_offset` bytes into the current file.
    pub(super) fn malformed(&mut self, reason: &'static str, end_offset: u64) -> bool {
        let item = Item::Malformed(reason);
        self.batch.items.push((item, self.file_index, end_offset));
        self.flush_if_full()
    }

    /// Hands the batch on if it is full; `false`: the ingress is gone.
    fn flush_if_full(&mut self) -> bool {
        let full = self.batch.data.len() >= BATCH_BYTES || self.batch.items.len() >= BATCH_ITEMS;
        !full || self.flush()
    }

    /// Hands the batch on, waiting while the queue is full; `false`: the ingress is gone.
    pub(super) fn flush(&mut self) -> bool {
        if self.batch.items.is_empty() {
            return true;
        }
        self.tx.send(Ok(std::mem::take(&mut self.batch))).is_ok()
    }

    /// Ends the stream with an error (after the records read before it).
    pub(super) fn fail(mut self, e: SourceError) {
        if self.flush() {
            let _ = self.tx.send(Err(e));
        }
    }
}

/// What [`SourceFeed::poll`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Polled<'a> {
    /// The next record (its offset becomes the source's when [`SourceFeed::admitted`] says it
    /// was admitted).
    Record(&'a [u8]),
    /// Nothing read yet (a stream waiting for its writer): ask again later.
    Pending,
    /// The source has no more records.
    End,
}

/// The ingress's side of a source: records in order, with the source's offset and malformed
/// counts.
pub struct SourceFeed {
    name: String,
    /// Paths of a file source's files, by index (empty for streams).
    paths: Vec<String>,
    rx: Receiver<Sent>,
    batch: Batch,
    next: usize,
    /// Records admitted.
    records: u64,
    /// The file index and byte offset just past the last record admitted.
    last: Option<(u32, u64)>,
    /// The same for the last record polled.
    polled: Option<(u32, u64)>,
    malformed: BTreeMap<String, u64>,
    ended: bool,
}

impl SourceFeed {
    /// Opens `spec` (a file, a directory's listing, a listening socket: errors show here) and
    /// starts its reader thread. The generator is not a source to read.
    pub fn open(spec: &SourceSpec) -> Result<SourceFeed, SourceError> {
        Self::open_share(spec, Share::WHOLE)
    }

    /// Opens `share` of `spec`, for one of several readers that split it (see [`Share`]).
    pub fn open_share(spec: &SourceSpec, share: Share) -> Result<SourceFeed, SourceError> {
        let opened = Opened::open(spec, share)?;
        let paths = opened.paths();
        let (tx, rx) = sync_channel(BATCHES_QUEUED);
        let out = Batcher {
            tx,
            batch: Batch::default(),
            file_index: 0,
        };
        std::thread::Builder::new()
            .name("clasp-source".into())
            .spawn(move || opened.read(out))
            .map_err(|e| SourceError::io("starting its reader thread", e))?;
        Ok(SourceFeed {
            name: spec.to_string(),
            paths,
            rx,
            batch: Batch::default(),
            next: 0,
            records: 0,
            last: None,
            polled: None,
            malformed: BTreeMap::new(),
            ended: false,
        })
    }

    /// The next record, if one has been read; malformed data on the way is counted.
    pub fn poll(&mut self) -> Result<Polled<'_>, SourceError> {
        loop {
            if let Some((item, file_index, end_offset)) = self.batch.items.get(self.next) {
                self.next += 1;
                match *item {
                    Item::Malformed(reason) => {
                        *self.malformed.entry(reason.to_string()).or_default() += 1;
                    }
                    Item::Record { start, end } => {
                        self.polled = Some((*file_index, *end_offset));
                        return Ok(Polled::Record(&self.batch.data[start..end]));
                    }
                }
                continue;
            }
            if self.ended {
                return Ok(Polled::End);
            }
            match self.rx.try_recv() {
                Ok(Ok(batch)) => {
                    self.batch = batch;
                    self.next = 0;
                }
                Ok(Err(e)) => {
                    self.ended = true;
                    return Err(e);
                }
                Err(TryRecvError::Empty) => return Ok(Polled::Pending),
                Err(TryRecvError::Disconnected) => self.ended = true,
            }
        }
    }

    /// The record last polled was admitted: the source's offset moves past it.
    pub fn admitted(&mut self) {
        if let Some(at) = self.polled.take() {
            self.records += 1;
            self.last = Some(at);
        }
    }

    /// The source's name, offset and malformed counts so far.
    pub fn report(&self) -> SourceReport {
        SourceReport {
            source: self.name.clone(),
            offset: SourceOffset {
                records: self.records,
                file: self.last.and_then(|(file_index, byte_offset)| {
                    let path = self.paths.get(file_index as usize)?;
                    Some(FilePosition {
                        file_index,
                        path: path.clone(),
                        byte_offset,
                    })
                }),
            },
            malformed: self.malformed.clone(),
        }
    }
}
