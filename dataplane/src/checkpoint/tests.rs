//! The store's promises: a round trip, and damage (a corrupt or truncated part, a missing
//! manifest, a full disk) costing at most the checkpoint it hits.

use super::*;
use crate::source::SourceOffset;
use std::path::PathBuf;

fn scratch(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "clasp-ckpt-test-{tag}-{}-{}",
        std::process::id(),
        crate::clock::monotonic_ns()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn part(worker: u32, fill: u8, n: usize) -> Part {
    Part {
        worker,
        groups: (0..n as u16)
            .map(|g| GroupState {
                operator: g % 3,
                key_group: g,
                archive: vec![fill; 16 + usize::from(g)],
            })
            .collect(),
    }
}

/// Writes checkpoint `id` with two parts; returns its manifest.
fn checkpoint(store: &FileStore, id: u64) -> Manifest {
    let parts = [part(1, id as u8, 5), part(2, id as u8 + 1, 7)];
    let refs = (parts.iter())
        .map(|p| store.write_part(id, &format!("w{}.part", p.worker), p))
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let mut base = OperatorBase {
        processed: 10 * id,
        ..OperatorBase::default()
    };
    base.outputs.add_hash(u128::MAX - u128::from(id));
    base.malformed_reasons.insert("bad".into(), id);
    let m = Manifest {
        id,
        created_unix_ms: 1,
        app: "wc".into(),
        seed: 3,
        epoch: 2,
        routing: vec![vec![0, 1, 1], vec![1, 0, 0]],
        workers: vec![1, 2],
        executors: 1,
        admitted: 100 * id,
        source: SourceOffset {
            records: 100 * id,
            file: None,
        },
        operators: vec![base],
        parts: refs,
        pause_ms: 1.5,
        run_s: 0.25 * id as f64,
        records: None,
        app_shape: Some("operators a (x); edges ".into()),
        source_tail_crc32: None,
    };
    store.commit(&m).unwrap();
    m
}

#[test]
fn a_checkpoint_round_trips_and_only_the_last_k_are_kept() {
    let dir = scratch("roundtrip");
    let store = FileStore::open(&dir, 2).unwrap();
    for id in 1..=3 {
        checkpoint(&store, id);
    }
    let l = store.load_latest().unwrap();
    assert_eq!(l.manifest.id, 3);
    assert!(l.skipped.is_empty());
    assert_eq!(l.parts, vec![part(1, 3, 5), part(2, 4, 7)]);
    assert_eq!(l.manifest.operators[0].outputs.sum, u128::MAX - 3);
    assert!(
        !store.checkpoint_dir(1).exists(),
        "only the newest 2 are kept"
    );
    assert!(store.checkpoint_dir(2).exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Damages one part of the newest checkpoint with `f`, then loads: the previous one is used
/// and the reason is given.
fn damaged_part_falls_back(tag: &str, f: impl FnOnce(&std::path::Path), says: &str) {
    let dir = scratch(tag);
    let store = FileStore::open(&dir, 2).unwrap();
    checkpoint(&store, 1);
    checkpoint(&store, 2);
    f(&store.checkpoint_dir(2).join("w2.part"));
    let l = store.load_latest().unwrap();
    assert_eq!(l.manifest.id, 1);
    assert_eq!(l.skipped.len(), 1, "{:?}", l.skipped);
    assert!(l.skipped[0].contains(says), "{:?}", l.skipped);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_corrupt_part_falls_back_to_the_previous_checkpoint() {
    damaged_part_falls_back(
        "corrupt",
        |p| {
            let mut b = std::fs::read(p).unwrap();
            let last = b.len() - 1;
            b[last] ^= 0x55;
            std::fs::write(p, b).unwrap();
        },
        "checksum mismatch",
    );
}

#[test]
fn a_truncated_part_falls_back_to_the_previous_checkpoint() {
    damaged_part_falls_back(
        "truncated",
        |p| {
            let b = std::fs::read(p).unwrap();
            std::fs::write(p, &b[..b.len() - 3]).unwrap();
        },
        "truncated",
    );
}

#[test]
fn a_checkpoint_without_its_manifest_is_ignored() {
    let dir = scratch("nomanifest");
    let store = FileStore::open(&dir, 2).unwrap();
    checkpoint(&store, 1);
    // Checkpoint 2's parts are written and its manifest never is (a crash in between).
    store.write_part(2, "w1.part", &part(1, 9, 3)).unwrap();
    let l = store.load_latest().unwrap();
    assert_eq!(l.manifest.id, 1);
    assert!(l.skipped[0].contains("no manifest"), "{:?}", l.skipped);
    // And an empty store says so.
    let empty = FileStore::open(scratch("empty"), 2).unwrap();
    let e = empty.load_latest().unwrap_err();
    assert!(e.to_string().contains("no complete checkpoint"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(empty.dir());
}

/// A 64 KiB tmpfs, unmounted when dropped.
struct SmallTmpfs(PathBuf);

impl Drop for SmallTmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn a_full_disk_fails_that_checkpoint_only() {
    let dir = scratch("enospc");
    std::fs::create_dir_all(&dir).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
        .arg(&dir)
        .output();
    let fs = match mounted {
        Ok(o) if o.status.success() => SmallTmpfs(dir),
        other => {
            let _ = std::fs::remove_dir_all(&dir);
            eprintln!("skipped: cannot mount a small tmpfs (needs root): {other:?}");
            return;
        }
    };
    let store = FileStore::open(&fs.0, 2).unwrap();
    checkpoint(&store, 1);
    // 200 KiB cannot fit in 64 KiB: the part fails, naming it, and leaves no temporary file.
    let big = Part {
        worker: 1,
        groups: vec![GroupState {
            operator: 0,
            key_group: 0,
            archive: vec![7; 200 * 1024],
        }],
    };
    let e = store.write_part(2, "w1.part", &big).unwrap_err();
    assert!(e.to_string().contains("w1.part"), "{e}");
    assert!(!store.checkpoint_dir(2).join(".w1.part.tmp").exists());
    store.discard(2);
    let l = store.load_latest().unwrap();
    assert_eq!(l.manifest.id, 1, "the previous checkpoint is intact");
    // With the space back, the next checkpoint succeeds.
    checkpoint(&store, 3);
    assert_eq!(store.load_latest().unwrap().manifest.id, 3);
}

/// What failed checkpoints leave (a directory with parts and no manifest) is removed when the
/// run ends, complete checkpoints stay; a file that only has a checkpoint's name is none, nor a
/// directory named otherwise than the store names one.
#[test]
fn unfinished_checkpoints_are_removed_and_stray_files_are_not_checkpoints() {
    let dir = scratch("unfinished");
    let store = FileStore::open(&dir, 4).unwrap();
    checkpoint(&store, 1);
    store.write_part(2, "w1.part", &part(1, 2, 3)).unwrap();
    std::fs::create_dir_all(store.checkpoint_dir(3)).unwrap();
    std::fs::write(store.checkpoint_dir(9), b"not a checkpoint").unwrap();
    // Nor a directory not named as the store names one (it would look for `ckpt-000…099`).
    std::fs::create_dir_all(dir.join("ckpt-99")).unwrap();
    assert_eq!(
        store.newest_present().unwrap(),
        Some(store.checkpoint_dir(3))
    );
    assert!(crate::checkpoint::holds_complete_checkpoint(&dir));
    assert_eq!(store.remove_unfinished().unwrap(), 2);
    assert_eq!(
        store.newest_present().unwrap(),
        Some(store.checkpoint_dir(1))
    );
    assert_eq!(store.load_latest().unwrap().manifest.id, 1);
    store.remove_checkpoints().unwrap();
    assert_eq!(store.newest_present().unwrap(), None);
    assert!(!crate::checkpoint::holds_complete_checkpoint(&dir));
    let _ = std::fs::remove_dir_all(&dir);
}

proptest::proptest! {
    /// A part's bytes come from a file another process wrote: any bytes are an error or a
    /// part, never a panic; mutating a valid part's bytes never panics either.
    #[test]
    fn decoding_a_part_never_panics(
        bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..256),
        flip in 0usize..4096,
    ) {
        let _ = Part::decode(&bytes);
        let mut valid = part(3, 9, 4).encode();
        let i = flip % valid.len();
        valid[i] ^= 0xa5;
        let _ = Part::decode(&valid);
    }
}

/// Removing a run's checkpoints leaves what else is in the directory, and the directory too
/// while anything is; an empty directory goes.
#[test]
fn remove_all_takes_only_the_checkpoints() {
    let dir = std::env::temp_dir().join(format!("clasp-ck-remove-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let store = FileStore::open(&dir, 2).unwrap();
    for id in 1..=2 {
        std::fs::create_dir_all(store.checkpoint_dir(id)).unwrap();
        std::fs::write(store.checkpoint_dir(id).join("MANIFEST"), b"x").unwrap();
    }
    std::fs::write(dir.join("notes.txt"), b"mine").unwrap();
    std::fs::create_dir(dir.join("sub")).unwrap();
    store.remove_all().unwrap();
    let mut left: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["notes.txt", "sub"]);
    std::fs::remove_file(dir.join("notes.txt")).unwrap();
    std::fs::remove_dir(dir.join("sub")).unwrap();
    store.remove_all().unwrap();
    assert!(!dir.exists(), "an empty directory is removed");
}

#[test]
fn a_held_directory_is_refused_naming_the_holder_and_free_once_released() {
    let dir = scratch("lock");
    let store = FileStore::open(&dir, 2).unwrap();
    let held = DirLock::take(&dir).unwrap();
    // Another hold (another open file description, as another process would have) is refused.
    match DirLock::take(&dir) {
        Err(e @ CheckpointError::InUse { .. }) => {
            let pid = std::process::id().to_string();
            assert!(e.to_string().contains(&format!("(pid {pid})")), "{e}");
        }
        other => panic!("a second hold: {other:?}"),
    }
    // A holder that ends removes its lock file while it still holds it: the next run locks a
    // new file at the path, not the unlinked one.
    std::fs::remove_file(held.path()).unwrap();
    let next = DirLock::take(&dir).unwrap();
    assert!(next.path().exists());
    drop((held, next));
    // Released: but a process another test of this binary forks meanwhile holds a copy of
    // every open file description until it execs (closing them), the lock's among them, so the
    // hold may outlive the drop for a moment.
    let again = (0..500)
        .find_map(|_| {
            DirLock::take(&dir)
                .inspect_err(|_| std::thread::sleep(std::time::Duration::from_millis(10)))
                .ok()
        })
        .expect("the lock is free once its holders dropped it");
    // A run that succeeded removes its lock file with its checkpoints, then the directory.
    checkpoint(&store, 1);
    store.remove_all().unwrap();
    assert!(!again.path().exists() && !dir.exists());
}

#[test]
fn a_source_file_rewritten_or_cut_short_since_the_checkpoint_is_not_the_one_it_read() {
    let dir = scratch("source-changed");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("input.txt");
    std::fs::write(&path, "alpha beta\ngamma delta\n").unwrap();
    let pos = crate::source::FilePosition {
        file_index: 0,
        path: path.display().to_string(),
        byte_offset: 11,
    };
    let mut m = checkpoint(&FileStore::open(dir.join("ck"), 2).unwrap(), 1);
    m.source.file = Some(pos.clone());
    m.source_tail_crc32 = pos.tail_crc32();
    assert_eq!(m.source_changed(), None, "the file it read");
    std::fs::write(&path, "alpha beta\ngamma delta\nepsilon\n").unwrap();
    assert_eq!(
        m.source_changed(),
        None,
        "a file that grew is the same file"
    );
    std::fs::write(&path, "other text\ngamma delta\n").unwrap();
    let why = m.source_changed().expect("a file rewritten in place");
    assert!(why.contains("rewritten since"), "{why}");
    std::fs::write(&path, "alpha\n").unwrap();
    let why = m.source_changed().expect("a file cut short");
    assert!(why.contains("holds 6 bytes now"), "{why}");
    let _ = std::fs::remove_dir_all(&dir);
}
