//! What a resume or a new run refuses about the checkpoints and the input it is given, before
//! or as it replays them (a file cut short or rewritten, a directory whose earlier file grew,
//! only unfinished checkpoints), and what `clasp clean` says of the checkpoints gone runs kept.

mod common;

use clasp_dataplane::checkpoint::checkpoint_dir_name;
use common::{clasp, start, until_a_checkpoint};
use std::path::PathBuf;

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("clasp-resume-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// A directory holding only an unfinished checkpoint (a run killed while it wrote its first)
/// is refused as a new run's `--checkpoint-dir` without the advice to resume it, which a
/// `--resume` of it refuses too (there is no complete checkpoint to go on from).
#[test]
fn a_checkpoint_dir_of_only_an_unfinished_checkpoint_is_not_offered_for_a_resume() {
    let dir = scratch("unfinished-only");
    let checkpoint = dir.join(checkpoint_dir_name(1));
    std::fs::create_dir_all(&checkpoint).unwrap();
    std::fs::write(checkpoint.join("w1.part"), b"a part alone").unwrap();
    let dir_s = dir.display().to_string();
    #[rustfmt::skip]
    let run = ["run", "--static", "--workers", "2", "--app", "wc", "--records", "100"];
    let fresh = clasp(&[&run[..], &["--checkpoint-dir", &dir_s]].concat());
    let resumed = clasp(&[&run[..], &["--resume", &dir_s]].concat());
    let _ = std::fs::remove_dir_all(&dir);
    let err = String::from_utf8_lossy(&fresh.stderr);
    assert_eq!(fresh.status.code(), Some(2), "{err}");
    assert!(
        err.contains("none is complete") && !err.contains("--resume"),
        "{err}"
    );
    let err = String::from_utf8_lossy(&resumed.stderr);
    assert_eq!(resumed.status.code(), Some(2), "{err}");
    assert!(err.contains("no complete checkpoint"), "{err}");
}

/// A resume goes on from the byte of the file its checkpoint had read to: a file cut short
/// since, or rewritten in place, is not the one the run read, and is refused (the rest of the
/// run would read nothing, or other records, and seem to succeed).
#[test]
fn a_resume_over_a_file_cut_short_since_is_refused() {
    let _turn = common::one_at_a_time();
    let dir = scratch("resume-cut");
    let input = dir.with_extension("txt");
    let lines = clasp(&["gen", "--app", "wc", "--records", "20000", "--seed", "3"]);
    std::fs::write(&input, &lines.stdout).unwrap();
    let (dir_s, source) = (
        dir.display().to_string(),
        format!("file:{}", input.display()),
    );
    let run = paced_wc_run(&source);
    killed_after_a_checkpoint(&run, &dir);
    // Rewritten in place, as long as it was (its lines in the other order): refused too.
    let reversed: Vec<&[u8]> = lines
        .stdout
        .split_inclusive(|&b| b == b'\n')
        .rev()
        .collect();
    std::fs::write(&input, reversed.concat()).unwrap();
    let rewritten = clasp(&[&run[..], &["--resume", &dir_s]].concat());
    std::fs::write(&input, b"the first line\n").unwrap();
    let out = clasp(&[&run[..], &["--resume", &dir_s]].concat());
    let _ = (std::fs::remove_dir_all(&dir), std::fs::remove_file(&input));
    for out in [rewritten, out] {
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("is not the file the run read"), "{err}");
    }
}

/// A `dir:` source is replayed by counting records: a file before the checkpoint's that grew
/// since would shift every record after it, so the resume is refused once the replay does not
/// reach the checkpoint's byte (it ran other records than the run did, and exited 0). Put
/// back, the directory resumes, spelled otherwise than the run spelled it.
#[test]
fn a_resume_over_a_dir_whose_earlier_file_grew_is_refused() {
    let _turn = common::one_at_a_time();
    let dir = scratch("resume-dir");
    let input = dir.with_extension("in");
    std::fs::create_dir_all(&input).unwrap();
    let lines = clasp(&["gen", "--app", "wc", "--records", "20000", "--seed", "3"]);
    // Twenty lines: the first checkpoint (150 ms at 4 000 a second) is well into b.txt.
    let (first_lines, rest) = lines.stdout.split_at(nth_line_end(&lines.stdout, 20));
    std::fs::write(input.join("a.txt"), first_lines).unwrap();
    std::fs::write(input.join("b.txt"), rest).unwrap();
    let (dir_s, source) = (
        dir.display().to_string(),
        format!("dir:{}", input.display()),
    );
    let run = paced_wc_run(&source);
    killed_after_a_checkpoint(&run, &dir);
    // The earlier file grows by a line: every record of b.txt is one further on.
    let mut grown = first_lines.to_vec();
    grown.extend_from_slice(b"one more line\n");
    std::fs::write(input.join("a.txt"), grown).unwrap();
    let out = clasp(&[&run[..], &["--resume", &dir_s]].concat());
    // Put back, it resumes, however the directory is spelled (here through a link to it).
    std::fs::write(input.join("a.txt"), first_lines).unwrap();
    let link = dir.with_extension("link");
    std::os::unix::fs::symlink(&input, &link).unwrap();
    let spelled = format!("dir:{}", link.display());
    let again = paced_wc_run(&spelled);
    let put_back = clasp(&[&again[..], &["--resume", &dir_s]].concat());
    let _ = (std::fs::remove_dir_all(&dir), std::fs::remove_file(&link));
    let _ = std::fs::remove_dir_all(&input);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("is not the input the run read"), "{err}");
    let err = String::from_utf8_lossy(&put_back.stderr);
    assert!(put_back.status.success(), "{err}");
}

/// A static two-worker WC run of seed 3 reading `source` at 4 000 records a second: slow
/// enough that its first checkpoint comes long before its end.
fn paced_wc_run(source: &str) -> Vec<&str> {
    #[rustfmt::skip]
    let run = vec!["run", "--static", "--workers", "2", "--app", "wc", "--seed", "3",
        "--source", source, "--rate", "4000"];
    run
}

/// Starts `run` taking a checkpoint every 150 ms into `dir`, and kills its driver once one is
/// complete.
fn killed_after_a_checkpoint(run: &[&str], dir: &std::path::Path) {
    let dir_s = dir.display().to_string();
    let every = [
        "--checkpoint-interval-ms",
        "150",
        "--checkpoint-dir",
        &dir_s,
    ];
    let mut driver = start(&[run, &every[..]].concat(), &[]);
    until_a_checkpoint(dir, &mut driver);
    assert!(!driver.kill().status.success());
}

/// The index just past the `n`th newline of `text` (its length if it has fewer).
fn nth_line_end(text: &[u8], n: usize) -> usize {
    text.iter()
        .enumerate()
        .filter(|(_, b)| **b == b'\n')
        .nth(n - 1)
        .map_or(text.len(), |(i, _)| i + 1)
}

/// `clasp clean` lists the checkpoints that runs which did not succeed keep in the default
/// directory (they do not pile up unseen) and leaves them for `--resume`; the directories gone
/// runs left empty (a resume that succeeded keeps the directory it was given) it removes.
#[test]
fn clean_lists_kept_checkpoints_and_leaves_them() {
    let _turn = common::one_at_a_time();
    let state = tempfile::tempdir().unwrap();
    // A run gone long ago (no process has this pid) and one whose process runs (this test).
    let root = state.path().join("clasp/checkpoints");
    let gone = root.join("run-1-99999999");
    let running = root.join(format!("run-2-{}", std::process::id()));
    // Gone while it wrote its first checkpoint: nothing to resume, and said so.
    let unfinished = root.join("run-4-99999997");
    for d in [&gone, &running, &unfinished] {
        std::fs::create_dir_all(d.join(checkpoint_dir_name(1))).unwrap();
    }
    for d in [&gone, &running] {
        std::fs::write(d.join(checkpoint_dir_name(1)).join("MANIFEST"), "").unwrap();
    }
    // Gone too, and emptied (what a resume that succeeded leaves): removed.
    let emptied = root.join("run-3-99999998");
    std::fs::create_dir_all(&emptied).unwrap();
    // Gone, holding something else (the user's): neither removed nor listed.
    let users = root.join("run-5-99999996");
    std::fs::create_dir_all(&users).unwrap();
    std::fs::write(users.join("notes.txt"), "mine").unwrap();
    // Running and empty for a moment (it is about to take its lock): left alone.
    let starting = root.join(format!("run-6-{}", std::process::id()));
    std::fs::create_dir_all(&starting).unwrap();
    let out = common::clasp_env(
        &["clean"],
        &[("XDG_STATE_HOME", state.path().to_str().unwrap())],
    );
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains(&format!("kept {}: checkpoints", gone.display())),
        "{said}"
    );
    assert!(
        said.contains(&format!("kept {}: unfinished", unfinished.display())),
        "{said}"
    );
    assert!(!said.contains(&running.display().to_string()), "{said}");
    assert!(
        said.contains(&format!(
            "removed the emptied checkpoint directory {}",
            emptied.display()
        )),
        "{said}"
    );
    assert!(!emptied.exists(), "{said}");
    assert!(!said.contains(&users.display().to_string()), "{said}");
    assert!(!said.contains(&starting.display().to_string()), "{said}");
    assert!(
        gone.exists() && running.exists() && users.exists() && starting.exists(),
        "checkpoints, a running run's directory or a user's file removed"
    );
}
