//! [`DirLock`]: one run at a time in a checkpoint directory.
//!
//! Two runs writing checkpoints into one directory would number theirs alike and prune each
//! other's, and a recovery would restore whichever was newest — state of the other run,
//! restored without an error. So a run's driver holds an exclusive `flock` on
//! `DIR/.clasp-lock` for as long as it runs, and a second run (or a `--resume` of a run that
//! still runs) is refused, naming the holder's pid. The lock is the kernel's: it goes with the
//! process that held it, however that ended, so a killed run leaves nothing to clean but the
//! (unlocked) file.

use super::CheckpointError;
use std::fs::{File, OpenOptions};
use std::io::{Read as _, Seek as _, Write as _};
use std::path::{Path, PathBuf};

/// The lock file's name in a checkpoint directory.
pub(super) const LOCK_FILE: &str = ".clasp-lock";

/// Attempts to lock a lock file that another run keeps removing before giving up.
const RELOCK_TRIES: usize = 8;

/// An exclusive hold on a checkpoint directory, released when dropped (or when the process
/// ends).
#[derive(Debug)]
pub struct DirLock {
    file: File,
    path: PathBuf,
}

impl DirLock {
    /// Takes the lock on `dir` (which exists), or says which process holds it.
    pub fn take(dir: &Path) -> Result<DirLock, CheckpointError> {
        let path = dir.join(LOCK_FILE);
        // A run that ends removes the file it held (`FileStore::remove_all`): a lock taken on
        // a file already unlinked would hold nothing, so it is taken again on the new one.
        for _ in 0..RELOCK_TRIES {
            let lock = Self::take_file(dir, &path)?;
            if lock.is_linked() {
                return Ok(lock);
            }
        }
        Err(CheckpointError::InUse {
            dir: dir.display().to_string(),
            holder: String::new(),
        })
    }

    /// Whether the locked file is still the one at its path.
    fn is_linked(&self) -> bool {
        use std::os::unix::fs::MetadataExt as _;
        match (self.file.metadata(), std::fs::metadata(&self.path)) {
            (Ok(held), Ok(now)) => held.dev() == now.dev() && held.ino() == now.ino(),
            _ => false,
        }
    }

    /// Opens and locks the file at `path`.
    fn take_file(dir: &Path, path: &Path) -> Result<DirLock, CheckpointError> {
        use rustix::fs::{FlockOperation, flock};
        let path = path.to_path_buf();
        let what = || format!("opening {}", path.display());
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| CheckpointError::io(what(), e))?;
        if let Err(e) = flock(&file, FlockOperation::NonBlockingLockExclusive) {
            if e != rustix::io::Errno::WOULDBLOCK {
                return Err(CheckpointError::io(
                    format!("locking {}", path.display()),
                    e.into(),
                ));
            }
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            return Err(CheckpointError::InUse {
                dir: dir.display().to_string(),
                holder: holder.trim().to_string(),
            });
        }
        // Who holds it, for the message a second run prints. Only that: on a full disk the
        // hold stands without it (and the checkpoints say what the disk refuses them).
        let written = file
            .set_len(0)
            .and_then(|()| file.rewind())
            .and_then(|()| writeln!(file, "{}", std::process::id()));
        if let Err(e) = written {
            tracing::debug!("writing {}: {e}", path.display());
        }
        Ok(DirLock { file, path })
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Removes the lock file, still holding the lock until dropped: for a run that leaves the
    /// directory as it found it (refused, or failed before its first checkpoint). Another run
    /// that opened the file meanwhile sees it unlinked and takes the lock on a new one.
    pub fn remove_file(&self) {
        if self.is_linked() {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}
