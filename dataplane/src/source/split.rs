//! Splitting a byte stream into records: newline-delimited lines, and length-prefixed records
//! (a `u32` little-endian byte count, then the bytes). Neither holds more than one record
//! ([`MAX_RECORD_BYTES`]) at a time; a longer one is skipped and counted.

use super::MAX_RECORD_BYTES;
use super::feed::Batcher;
use super::malformed::{TOO_LONG, TRUNCATED};
use std::io::{self, BufRead, BufReader, Read};

/// The most bytes of a line kept while it is read: a record's, and the `\r` of a `\r\n` end.
const MAX_LINE_BYTES: usize = MAX_RECORD_BYTES + 1;

/// Hands every line of `input` (the newline stripped, and a carriage return before it: a text
/// file written on Windows ends its lines in `\r\n`; a last line without one included) to
/// `out`: `input` stands at byte `offset_bytes` of its file, and the lines that start at or
/// after `end` are left to another reader. Before each read that may wait for more input, the
/// records read so far are handed on, so a slow writer's records are not held back.
/// `Ok(false)`: the ingress is gone. Reaching the input's end at byte `at` is an error if
/// `shrank(at)` names the byte the file held before it was cut short (a file truncated while
/// read: what it held past `at`, a cut line included, is gone; a file of sysfs says 4 096
/// bytes and holds fewer: its end comes early and it did not shrink).
pub(super) fn read_lines<R: Read>(
    input: &mut BufReader<R>,
    mut offset_bytes: u64,
    end: u64,
    out: &mut Batcher,
    shrank: impl FnOnce(u64) -> Option<u64>,
) -> io::Result<bool> {
    let mut line = Vec::new();
    let mut too_long = false;
    loop {
        if line.is_empty() && !too_long && offset_bytes >= end {
            return Ok(true);
        }
        if input.buffer().is_empty() && !out.flush() {
            return Ok(false);
        }
        let buf = match input.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            if let Some(held_bytes) = shrank(offset_bytes) {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "ended at byte {offset_bytes}, before byte {held_bytes} it reached \
                         when it was opened (truncated while it was read?)"
                    ),
                ));
            }
            let open = if too_long {
                out.malformed(TOO_LONG, offset_bytes)
            } else if !without_cr(&line).is_empty() {
                // A last line of a lone `\r` is an empty last line: no record, as for none.
                hand_on(&line, offset_bytes, out)
            } else {
                true
            };
            return Ok(open);
        }
        let newline = buf.iter().position(|&b| b == b'\n');
        let chunk = &buf[..newline.unwrap_or(buf.len())];
        let consumed = chunk.len() + usize::from(newline.is_some());
        offset_bytes += consumed as u64;
        let mut open = true;
        if !too_long && line.len() + chunk.len() > MAX_LINE_BYTES {
            too_long = true;
            line.clear();
        }
        match (newline.is_some(), too_long) {
            (true, true) => open = out.malformed(TOO_LONG, offset_bytes),
            // A whole line in the buffer: no copy into `line`.
            (true, false) if line.is_empty() => open = hand_on(chunk, offset_bytes, out),
            (true, false) => {
                line.extend_from_slice(chunk);
                open = hand_on(&line, offset_bytes, out);
            }
            (false, false) => line.extend_from_slice(chunk),
            (false, true) => {}
        }
        input.consume(consumed);
        if newline.is_some() {
            line.clear();
            too_long = false;
        }
        if !open {
            return Ok(false);
        }
    }
}

/// `line` without the carriage return it ends in, if it does.
fn without_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// Hands on a whole line (at most [`MAX_LINE_BYTES`]) as a record without its carriage
/// return, or counts it too long: only a `\r\n` line may hold the one byte more.
fn hand_on(line: &[u8], offset_bytes: u64, out: &mut Batcher) -> bool {
    let record = without_cr(line);
    if record.len() > MAX_RECORD_BYTES {
        out.malformed(TOO_LONG, offset_bytes)
    } else {
        out.record(record, offset_bytes)
    }
}

/// Hands every length-prefixed record of `input` to `out`: a record over
/// [`MAX_RECORD_BYTES`] is skipped (its bytes read, not kept) and a prefix or record cut
/// short by the end of the input is counted, both as malformed. `Ok(false)`: the ingress is
/// gone.
pub(super) fn read_length_prefixed<R: Read>(
    input: &mut BufReader<R>,
    out: &mut Batcher,
) -> io::Result<bool> {
    let mut record = Vec::new();
    let mut offset_bytes = 0u64;
    loop {
        let mut prefix = [0u8; 4];
        let got = read_full(input, &mut prefix)?;
        offset_bytes += got as u64;
        if got == 0 {
            return Ok(true);
        }
        if got < prefix.len() {
            return Ok(out.malformed(TRUNCATED, offset_bytes));
        }
        let len = u32::from_le_bytes(prefix) as usize;
        if len > MAX_RECORD_BYTES {
            let skipped = io::copy(&mut input.by_ref().take(len as u64), &mut io::sink())?;
            offset_bytes += skipped;
            if skipped < len as u64 {
                return Ok(out.malformed(TRUNCATED, offset_bytes));
            }
            if !out.malformed(TOO_LONG, offset_bytes) {
                return Ok(false);
            }
            continue;
        }
        record.resize(len, 0);
        let got = read_full(input, &mut record)?;
        offset_bytes += got as u64;
        if got < len {
            return Ok(out.malformed(TRUNCATED, offset_bytes));
        }
        if !out.record(&record, offset_bytes) {
            return Ok(false);
        }
    }
}

/// Reads until `buf` is full or the input ends; the bytes read.
fn read_full<R: Read>(input: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match input.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}
