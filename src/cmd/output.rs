//! Command output on stdout, with every write checked.
//!
//! `println!` panics when stdout fails (a full disk, a closed pipe), so commands write through
//! [`Stdout`] instead: a buffered, locked stdout whose errors are returned, not panicked on, and
//! carry a [`StdoutError`] tag. The tag lets `main` tell the two endings apart: a reader that
//! went away (`clasp apps | head -1`, EPIPE) ends the program quietly, while any other failure
//! (ENOSPC on `> /dev/full`) is an error with a message. Nothing is written until the command
//! flushes with [`Stdout::finish`]; a buffered writer dropped unflushed would lose the error.

use std::io::{self, BufWriter, StdoutLock, Write};

/// A failed write to stdout (inside the `io::Error` a [`Stdout`] returns).
#[derive(Debug)]
pub struct StdoutError(io::Error);

impl std::fmt::Display for StdoutError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "writing to stdout: {}", self.0)
    }
}

impl std::error::Error for StdoutError {}

/// The process's stdout, locked and buffered; every error is tagged as a [`StdoutError`].
pub struct Stdout(BufWriter<StdoutLock<'static>>);

/// The command's output writer.
pub fn stdout() -> Stdout {
    Stdout(BufWriter::new(io::stdout().lock()))
}

fn tag(e: io::Error) -> io::Error {
    io::Error::new(e.kind(), StdoutError(e))
}

impl Stdout {
    /// Flushes everything written; the command's last step.
    pub fn finish(mut self) -> anyhow::Result<()> {
        self.flush()?;
        Ok(())
    }
}

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf).map_err(tag)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.0.write_all(buf).map_err(tag)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush().map_err(tag)
    }
}

/// A run's result once its summary was printed (`printed`): its faults come first, since a
/// summary that could not be printed — its reader gone, as a `stdout:` sink's is when that
/// sink failed — must not turn a failed run into a quiet success; then the print's own error.
pub fn run_result(printed: anyhow::Result<()>, faults: &[String]) -> anyhow::Result<()> {
    if !faults.is_empty() {
        anyhow::bail!("the run had faults: {}", faults.join("; "));
    }
    printed
}

/// Whether `err` is a write to stdout that failed because its reader went away (EPIPE): the
/// output is no longer wanted, which is not a failure of the command.
pub fn is_closed_stdout(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<io::Error>().is_some_and(|io| {
            io.kind() == io::ErrorKind::BrokenPipe
                && io.get_ref().is_some_and(|inner| inner.is::<StdoutError>())
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closed_stdout_is_recognised_and_nothing_else_is() {
        let closed = anyhow::Error::new(tag(io::Error::from(io::ErrorKind::BrokenPipe)));
        assert!(is_closed_stdout(&closed.context("printing")));
        let full = anyhow::Error::new(tag(io::Error::from_raw_os_error(28)));
        assert!(!is_closed_stdout(&full));
        assert!(
            full.to_string().starts_with("writing to stdout: "),
            "{full}"
        );
        // A broken pipe elsewhere (a socket, a child's stdin) is a real error.
        let other = anyhow::Error::new(io::Error::from(io::ErrorKind::BrokenPipe));
        assert!(!is_closed_stdout(&other));
    }
}
