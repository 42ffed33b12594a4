//! A reader's share of a file source, so that several readers (one per worker) read one
//! source without coordinating: a directory is split by file (file `i` goes to share
//! `i mod shares`); a single file of lines by byte range, each line belonging to the share in
//! which its first byte lies. A length-prefixed file has no marker to resynchronise on in the
//! middle, so share 0 reads it whole; so do streams (standard input, one TCP address), and a
//! `file:` that is a pipe or a device, or whose size reads 0 (most of `/proc`): its size says
//! nothing about where it ends.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Seek, SeekFrom};
use std::ops::Range;
use std::path::PathBuf;

/// Share `index` of `shares` (`index < shares`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Share {
    /// This reader's share.
    pub index: u32,
    /// How many readers split the source.
    pub shares: u32,
}

impl Share {
    /// The whole source.
    pub const WHOLE: Share = Share {
        index: 0,
        shares: 1,
    };

    /// Whether this share reads a source that cannot be split.
    pub fn reads_unsplit(&self) -> bool {
        self.index == 0
    }
}

/// A byte range of one file of the source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Part {
    /// The file's index in the source's files.
    pub(super) file_index: u32,
    /// Bytes whose lines this share reads (lines starting in the range).
    pub(super) range: Range<u64>,
}

/// The parts of `files` (a `dir:` listing, or the one file of `file:`) that `share` reads.
pub(super) fn parts(files: &[PathBuf], share: Share, split_bytes: bool) -> io::Result<Vec<Part>> {
    let shares = u64::from(share.shares.max(1));
    let index = u64::from(share.index);
    if split_bytes && files.len() == 1 {
        let meta = std::fs::metadata(&files[0])?;
        // A pipe or device, or a file whose size says nothing (most of /proc): read whole to
        // its end by the first share, as a stream is.
        if !meta.is_file() || meta.len() == 0 {
            let whole = Part {
                file_index: 0,
                range: 0..u64::MAX,
            };
            return Ok(share.reads_unsplit().then_some(whole).into_iter().collect());
        }
        let len = meta.len();
        let range = len * index / shares..len * (index + 1) / shares;
        return Ok(vec![Part {
            file_index: 0,
            range,
        }]);
    }
    Ok((0..files.len() as u64)
        .filter(|i| i % shares == index)
        .map(|i| Part {
            file_index: i as u32,
            range: 0..u64::MAX,
        })
        .collect())
}

/// `file` positioned at the first line that starts at or after `start`: where the share that
/// begins at `start` reads from. Returns the reader and that position.
pub(super) fn first_line_at(
    file: File,
    start: u64,
    capacity: usize,
) -> io::Result<(BufReader<File>, u64)> {
    let mut r = BufReader::with_capacity(capacity, file);
    if start == 0 {
        return Ok((r, 0));
    }
    // The line that holds byte `start - 1` belongs to the share before, unless it ends there.
    r.seek(SeekFrom::Start(start - 1))?;
    let skipped = r.skip_until(b'\n')? as u64;
    Ok((r, start - 1 + skipped))
}
