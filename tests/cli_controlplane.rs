//! `clasp place` and `clasp sim` through the binary.

mod common;

use common::clasp;

const PROBLEM: &str = r#"{"capacity_us_per_s": 850000, "headroom": 0.9,
 "alpha_us": 38.5, "beta_us": 275, "gamma_us": 51500,
 "max_workers": 10, "slots_per_worker": 10,
 "operators": [{"name": "split", "demand_us_per_s": 400000, "rate_per_s": 1000, "exec_us": 400},
               {"name": "count", "demand_us_per_s": 1200000, "rate_per_s": 10000, "exec_us": 120}],
 "edges": [{"from": "split", "to": "count", "rate_per_s": 10000}]}"#;

/// A temp file holding `text`, removed when dropped.
fn write(name: &str, text: &str) -> tempfile::TempPath {
    common::temp_file(name, text)
}

#[test]
fn place_answers_every_policy_and_clasp_is_feasible() {
    let file = write("problem.json", PROBLEM);
    // The exact reference searches at most 3 workers: give it a quarter of the load.
    let small = write(
        "small.json",
        &PROBLEM
            .replace("400000", "100000")
            .replace("1200000", "300000"),
    );
    for policy in ["clasp", "faasflow", "zhang24", "exact"] {
        let file = if policy == "exact" { &small } else { &file };
        let out = clasp(&[
            "place",
            "--problem",
            file.to_str().expect("utf8"),
            "--policy",
            policy,
            "--json",
        ]);
        assert!(
            out.status.success(),
            "{policy}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
        assert_eq!(v["policy"], policy);
        let workers = v["workers"].as_u64().expect("workers") as usize;
        assert_eq!(
            v["loads_us_per_s"].as_array().expect("loads").len(),
            workers
        );
        assert_eq!(
            v["shares"]["split"].as_array().expect("split").len(),
            workers
        );
        assert!(v["saturated"].is_boolean() && v["fraction_placed"].is_number());
        if policy == "clasp" || policy == "exact" {
            for l in v["loads_us_per_s"].as_array().expect("loads") {
                assert!(l.as_f64().expect("f64") <= 0.9 * 850000.0 * (1.0 + 1e-9));
            }
        }
    }
}

#[test]
fn malformed_problems_exit_2_with_a_clear_error() {
    let cycle = PROBLEM.replace(
        r#""edges": [{"from": "split", "to": "count", "rate_per_s": 10000}]"#,
        r#""edges": [{"from": "split", "to": "count", "rate_per_s": 1}, {"from": "count", "to": "split", "rate_per_s": 1}]"#,
    );
    let unknown = PROBLEM.replace(r#""to": "count""#, r#""to": "nowhere""#);
    let negative = PROBLEM.replace(r#""demand_us_per_s": 400000"#, r#""demand_us_per_s": -4"#);
    for (name, text, needle) in [
        ("c.json", cycle, "cycle"),
        ("u.json", unknown, "nowhere"),
        ("n.json", negative, "non-negative"),
    ] {
        let f = write(name, &text);
        let out = clasp(&["place", "--problem", f.to_str().expect("utf8")]);
        assert_eq!(out.status.code(), Some(2), "{name}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(needle),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let f = write("ok.json", PROBLEM);
    let out = clasp(&[
        "place",
        "--problem",
        f.to_str().expect("utf8"),
        "--policy",
        "magic",
    ]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn sim_rejects_bad_arguments() {
    let out = clasp(&["sim", "--experiment", "nope"]);
    assert_eq!(out.status.code(), Some(2));
    let out = clasp(&["sim", "--experiment", "placement", "--workers", "5000"]);
    assert_eq!(out.status.code(), Some(2));
}

/// A SYN-like 3-stage app file with a shortcut (s1 feeds s2 and s3, s2 feeds s3).
const DIAMOND_TOML: &str = r#"
name = "diamond3"
generator = "syn"

[[operator]]
name = "s1"
kind = "forward"
successors = ["s2", "s3"]

[[operator]]
name = "s2"
kind = "forward"
successors = ["s3"]

[[operator]]
name = "s3"
kind = "forward"
"#;

#[test]
fn sim_takes_an_app_file_and_rejects_a_bad_one() {
    let f = write("diamond3.toml", DIAMOND_TOML);
    let out = clasp(&[
        "sim",
        "--experiment",
        "placement",
        "--app-file",
        f.to_str().expect("utf8"),
        "--workers",
        "3",
        "--seeds",
        "1",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["experiment"], "placement");
    for policy in ["clasp", "faasflow", "zhang24"] {
        let t = v["results"][policy]["diamond3"]["throughput_per_s"]
            .as_f64()
            .unwrap_or_else(|| panic!("{policy}: no result for diamond3 in {v}"));
        assert!(t > 0.0, "{policy}: {t}");
    }

    let bad = write(
        "bad.toml",
        &DIAMOND_TOML.replace(r#"successors = ["s3"]"#, r#"successors = ["s9"]"#),
    );
    let missing = std::env::temp_dir().join("clasp-cli-cp-no-such-app.toml");
    for (f, needle) in [(&*bad, "s9"), (missing.as_path(), "no-such-app")] {
        let out = clasp(&[
            "sim",
            "--experiment",
            "placement",
            "--app-file",
            f.to_str().expect("utf8"),
            "--workers",
            "3",
            "--seeds",
            "1",
        ]);
        assert_eq!(out.status.code(), Some(2), "{}", f.display());
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(needle),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let out = clasp(&["sim", "--experiment", "placement", "--app", "nope"]);
    assert_eq!(out.status.code(), Some(2));
}

/// `sim --out` on a full disk prints its summary before it fails on the files: the figures are
/// not lost with them (the summary was printed only after the files were written).
#[test]
fn sim_on_a_full_disk_prints_its_summary_and_names_the_directory() {
    let fs = match common::SmallTmpfs::mount("sim", "64k") {
        Ok(fs) => fs,
        Err(why) => {
            eprintln!("skipped: no small tmpfs to fill ({why})");
            return;
        }
    };
    // Filled but for a few bytes.
    let _ = std::fs::write(fs.0.join("filler"), vec![0u8; 64 << 10]);
    let dir = fs.0.join("out");
    let out = clasp(&[
        "sim",
        "--experiment",
        "placement",
        "--workers",
        "2",
        "--app",
        "wc",
        "--seeds",
        "1",
        "--json",
        "--out",
        dir.to_str().expect("utf8"),
    ]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("the summary");
    assert_eq!(v["experiment"], "placement", "{v}");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains(&format!("writing the results into {}", dir.display())),
        "{said}"
    );
}
