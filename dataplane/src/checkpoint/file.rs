//! [`FileStore`]: checkpoints in a directory, one subdirectory per checkpoint
//! (`ckpt-<id, 20 digits>`, so name order is id order), one file per part and `MANIFEST`.
//!
//! Every file is `MAGIC`, the body's length (u64 LE) and CRC-32 (u32 LE), then the body; it is
//! written as `.NAME.tmp`, fsync'd, renamed to `NAME`, and the directory fsync'd, so a file
//! that has its name is complete unless the disk lied — which the checksum catches.

use super::{CheckpointError, CheckpointStore, Loaded, Manifest, Part, PartRef};
use std::fs::{self, File};
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// The first bytes of every checkpoint file.
const MAGIC: &[u8; 8] = b"CLASPCK1";
/// Magic, length and checksum.
const HEADER_BYTES: usize = 8 + 8 + 4;
/// The manifest's file name.
const MANIFEST: &str = "MANIFEST";
/// Checkpoint directories are named this, then the id.
const PREFIX: &str = "ckpt-";

/// Checkpoints in a directory (module docs).
#[derive(Clone, Debug)]
pub struct FileStore {
    dir: PathBuf,
    keep: usize,
}

impl FileStore {
    /// A store in `dir` (created, with its parents, if missing) keeping the newest `keep`.
    pub fn open(dir: impl Into<PathBuf>, keep: usize) -> Result<FileStore, CheckpointError> {
        let dir = dir.into();
        fs::create_dir_all(&dir)
            .map_err(|e| CheckpointError::io(format!("creating {}", dir.display()), e))?;
        Ok(FileStore {
            dir,
            keep: keep.max(1),
        })
    }

    /// The store's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The directory of checkpoint `id`.
    pub fn checkpoint_dir(&self, id: u64) -> PathBuf {
        self.dir.join(checkpoint_dir_name(id))
    }

    /// Removes every checkpoint in the directory and its lock file (the run that held it is
    /// ending), then the directory if nothing else is in it: what else a user keeps there (the
    /// directory may be theirs) is left alone.
    pub fn remove_all(&self) -> Result<(), CheckpointError> {
        self.remove_checkpoints()?;
        match fs::remove_dir(&self.dir) {
            Err(e) if e.kind() != std::io::ErrorKind::DirectoryNotEmpty => Err(
                CheckpointError::io(format!("removing {}", self.dir.display()), e),
            ),
            _ => Ok(()),
        }
    }

    /// Removes every checkpoint in the directory and its lock file, and keeps the directory.
    pub fn remove_checkpoints(&self) -> Result<(), CheckpointError> {
        for id in self.ids()? {
            let dir = self.checkpoint_dir(id);
            fs::remove_dir_all(&dir)
                .map_err(|e| CheckpointError::io(format!("removing {}", dir.display()), e))?;
        }
        let lock = self.dir.join(super::lock::LOCK_FILE);
        if let Err(e) = fs::remove_file(&lock)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            return Err(CheckpointError::io(
                format!("removing {}", lock.display()),
                e,
            ));
        }
        Ok(())
    }

    /// The newest checkpoint directory present (complete or not), if any: a new run refuses a
    /// directory that holds one, since a recovery restores the newest checkpoint there.
    pub fn newest_present(&self) -> Result<Option<PathBuf>, CheckpointError> {
        Ok(self.ids()?.first().map(|&id| self.checkpoint_dir(id)))
    }

    /// Removes the checkpoint directories that hold no manifest: parts of checkpoints that
    /// failed (a full disk) or were cut short by the run's end, which no recovery can use.
    /// Called when the run that wrote them ends, so a directory of failed checkpoints is not
    /// taken for one to resume from. Returns how many it removed.
    pub fn remove_unfinished(&self) -> Result<usize, CheckpointError> {
        let mut removed = 0;
        for id in self.ids()? {
            let dir = self.checkpoint_dir(id);
            if is_complete(&dir) {
                continue;
            }
            fs::remove_dir_all(&dir)
                .map_err(|e| CheckpointError::io(format!("removing {}", dir.display()), e))?;
            removed += 1;
        }
        Ok(removed)
    }

    /// Ids of the checkpoint directories present, newest first (complete or not;
    /// [`checkpoint_ids`]).
    fn ids(&self) -> Result<Vec<u64>, CheckpointError> {
        checkpoint_ids(&self.dir)
            .map_err(|e| CheckpointError::io(format!("listing {}", self.dir.display()), e))
    }

    /// Reads checkpoint `id`: its manifest, then every part, each checked.
    fn load(&self, id: u64) -> Result<Loaded, CheckpointError> {
        let dir = self.checkpoint_dir(id);
        let body = read_checked(&dir.join(MANIFEST))?;
        let manifest: Manifest =
            serde_json::from_slice(&body).map_err(|e| CheckpointError::Corrupt {
                path: dir.join(MANIFEST).display().to_string(),
                why: format!("not a manifest: {e}"),
            })?;
        let mut parts = Vec::with_capacity(manifest.parts.len());
        for r in &manifest.parts {
            let path = dir.join(&r.name);
            let corrupt = |why: String| CheckpointError::Corrupt {
                path: path.display().to_string(),
                why,
            };
            let body = read_checked(&path)?;
            let crc = crc32fast::hash(&body);
            if crc != r.crc32 || body.len() as u64 != r.bytes {
                return Err(corrupt(format!(
                    "{} bytes with CRC {crc:08x}; the manifest says {} with {:08x}",
                    body.len(),
                    r.bytes,
                    r.crc32
                )));
            }
            parts.push(Part::decode(&body).map_err(corrupt)?);
        }
        Ok(Loaded {
            manifest,
            parts,
            skipped: Vec::new(),
        })
    }
}

impl CheckpointStore for FileStore {
    fn write_part(&self, id: u64, name: &str, part: &Part) -> Result<PartRef, CheckpointError> {
        let dir = self.checkpoint_dir(id);
        fs::create_dir_all(&dir)
            .map_err(|e| CheckpointError::io(format!("creating {}", dir.display()), e))?;
        let body = part.encode();
        // A part that fails leaves the checkpoint's directory: another worker's part may be
        // being written into it (the driver discards the whole checkpoint).
        let crc32 = write_durably(&dir, name, &body)?;
        Ok(PartRef {
            name: name.to_string(),
            crc32,
            bytes: body.len() as u64,
            groups: part.groups.len() as u64,
        })
    }

    fn commit(&self, manifest: &Manifest) -> Result<(), CheckpointError> {
        let dir = self.checkpoint_dir(manifest.id);
        fs::create_dir_all(&dir)
            .map_err(|e| CheckpointError::io(format!("creating {}", dir.display()), e))?;
        let body = serde_json::to_vec_pretty(manifest)
            .map_err(|e| CheckpointError::io("encoding the manifest", e.into()))?;
        write_durably(&dir, MANIFEST, &body)?;
        // Prune: keep the newest `keep` complete checkpoints, and nothing older than them.
        let ids = self.ids()?;
        let complete: Vec<u64> = (ids.iter().copied())
            .filter(|&i| is_complete(&self.checkpoint_dir(i)))
            .take(self.keep)
            .collect();
        if let Some(&oldest_kept) = complete.last() {
            for i in ids.into_iter().filter(|&i| i < oldest_kept) {
                self.discard(i);
            }
        }
        Ok(())
    }

    fn load_latest(&self) -> Result<Loaded, CheckpointError> {
        let mut skipped = Vec::new();
        for id in self.ids()? {
            if !is_complete(&self.checkpoint_dir(id)) {
                skipped.push(format!("checkpoint {id} has no manifest (incomplete)"));
                continue;
            }
            match self.load(id) {
                Ok(mut l) => {
                    l.skipped = skipped;
                    return Ok(l);
                }
                Err(e) => skipped.push(format!("checkpoint {id}: {e}")),
            }
        }
        Err(CheckpointError::NoneComplete {
            dir: self.dir.display().to_string(),
            skipped,
        })
    }

    fn discard(&self, id: u64) {
        let dir = self.checkpoint_dir(id);
        if let Err(e) = fs::remove_dir_all(&dir)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!("removing checkpoint {}: {e}", dir.display());
        }
    }
}

/// The ids of the checkpoint directories in `dir`, newest first (complete or not), listed
/// without creating anything: real directories (not links) named exactly as
/// [`FileStore::checkpoint_dir`] names an id. A file that merely has a checkpoint's name is not
/// one, nor `ckpt-99` (the store would look for, and remove, `ckpt-00000000000000000099`).
pub fn checkpoint_ids(dir: &Path) -> std::io::Result<Vec<u64>> {
    let mut ids: Vec<u64> = fs::read_dir(dir)?
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| id_of(e.file_name().to_str()?))
        .collect();
    ids.sort_unstable_by(|a, b| b.cmp(a));
    Ok(ids)
}

/// Whether checkpoint directory `checkpoint` is complete: its manifest, written last, is there.
fn is_complete(checkpoint: &Path) -> bool {
    checkpoint.join(MANIFEST).is_file()
}

/// Whether `dir` holds a complete checkpoint, looked at without creating anything.
pub fn holds_complete_checkpoint(dir: &Path) -> bool {
    checkpoint_ids(dir).is_ok_and(|ids| {
        ids.iter()
            .any(|&id| is_complete(&dir.join(checkpoint_dir_name(id))))
    })
}

/// Digits of a checkpoint id in its directory's name: every `u64` fits, so name order is id
/// order.
const ID_DIGITS: usize = 20;
const _: () = assert!(u64::MAX.ilog10() as usize + 1 == ID_DIGITS);

/// The name of checkpoint `id`'s directory: `ckpt-` and the id in [`ID_DIGITS`] digits.
pub fn checkpoint_dir_name(id: u64) -> String {
    format!("{PREFIX}{id:0ID_DIGITS$}")
}

/// The id of a checkpoint directory named `name`, if it is exactly the name
/// [`checkpoint_dir_name`] gives an id.
fn id_of(name: &str) -> Option<u64> {
    let id = name.strip_prefix(PREFIX)?.parse().ok()?;
    (checkpoint_dir_name(id) == name).then_some(id)
}

/// Writes `body` as `dir/name` (module docs); its CRC-32.
fn write_durably(dir: &Path, name: &str, body: &[u8]) -> Result<u32, CheckpointError> {
    let tmp = dir.join(format!(".{name}.tmp"));
    let path = dir.join(name);
    let crc = crc32fast::hash(body);
    let mut header = [0u8; HEADER_BYTES];
    header[..8].copy_from_slice(MAGIC);
    header[8..16].copy_from_slice(&(body.len() as u64).to_le_bytes());
    header[16..].copy_from_slice(&crc.to_le_bytes());
    let written = File::create(&tmp)
        .and_then(|mut f| {
            f.write_all(&header)?;
            f.write_all(body)?;
            f.sync_all()
        })
        .and_then(|()| fs::rename(&tmp, &path))
        .and_then(|()| File::open(dir)?.sync_all());
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(CheckpointError::io(
            format!("writing {}", path.display()),
            e,
        ));
    }
    Ok(crc)
}

/// Reads the part at `path` (a worker restoring from a checkpoint), checking it against the
/// manifest's checksum `crc32` as well as its own.
pub fn read_part(path: &Path, crc32: u32) -> Result<Part, CheckpointError> {
    let body = read_checked(path)?;
    let corrupt = |why: String| CheckpointError::Corrupt {
        path: path.display().to_string(),
        why,
    };
    let crc = crc32fast::hash(&body);
    if crc != crc32 {
        return Err(corrupt(format!(
            "CRC {crc:08x}, the manifest says {crc32:08x}"
        )));
    }
    Part::decode(&body).map_err(corrupt)
}

/// Reads a file written by [`write_durably`], checking its magic, length and checksum.
fn read_checked(path: &Path) -> Result<Vec<u8>, CheckpointError> {
    let bytes = fs::read(path)
        .map_err(|e| CheckpointError::io(format!("reading {}", path.display()), e))?;
    let corrupt = |why: String| CheckpointError::Corrupt {
        path: path.display().to_string(),
        why,
    };
    if bytes.len() < HEADER_BYTES || &bytes[..8] != MAGIC {
        return Err(corrupt("no checkpoint header".into()));
    }
    let len = u64::from_le_bytes(bytes[8..16].try_into().unwrap_or_default());
    let crc = u32::from_le_bytes(bytes[16..HEADER_BYTES].try_into().unwrap_or_default());
    let body = &bytes[HEADER_BYTES..];
    if body.len() as u64 != len {
        return Err(corrupt(format!(
            "{} bytes of body, the header says {len} (truncated?)",
            body.len()
        )));
    }
    if crc32fast::hash(body) != crc {
        return Err(corrupt("checksum mismatch".into()));
    }
    Ok(body.to_vec())
}
