//! The `apps`, `gen` and `oracle` subcommands, run as the built binary.

mod common;

use common::clasp_text as clasp;

#[test]
fn apps_json_lists_the_seven_benchmark_apps_and_wc_text() {
    let (code, out, _) = clasp(&["apps", "--json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let counts: Vec<(String, u64)> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["name"].as_str().unwrap().to_owned(),
                a["operators"].as_u64().unwrap(),
            )
        })
        .collect();
    let expect = [
        ("wc", 2),
        ("sd", 2),
        ("aa", 5),
        ("pl", 6),
        ("nwm", 10),
        ("etl", 10),
        ("syn", 10),
        ("wc-text", 2),
    ];
    assert_eq!(counts, expect.map(|(n, c)| (n.to_owned(), c)));
    let (code, out, _) = clasp(&["apps", "show", "etl", "--dot"]);
    assert_eq!(code, 0);
    assert!(out.starts_with("digraph"));
    assert_eq!(clasp(&["apps", "show", "nope"]).0, 2);
}

#[test]
fn oracle_json_is_deterministic_and_seeded() {
    let run = |seed: &str| {
        let (code, out, err) = clasp(&[
            "oracle",
            "--app",
            "wc",
            "--records",
            "200",
            "--seed",
            seed,
            "--json",
        ]);
        assert_eq!(code, 0, "{err}");
        serde_json::from_str::<serde_json::Value>(&out).unwrap()
    };
    let (a, b, c) = (run("1"), run("1"), run("2"));
    assert_eq!(a, b);
    assert_ne!(a["state_digest"], c["state_digest"]);
    let mut keys: Vec<&str> = a.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "app",
            "output_digest",
            "processed",
            "records",
            "seed",
            "state_digest",
            "state_digests"
        ]
    );
    assert_eq!(a["processed"]["count"], 2000);
    assert_eq!(a["state_digest"].as_str().unwrap().len(), 48);
}

#[test]
fn oracle_runs_an_app_file_and_rejects_bad_input() {
    let dir = std::env::temp_dir().join(format!("clasp-cli-operators-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = dir.join("wc10.toml");
    std::fs::write(
        &good,
        "name = \"wc10\"\ngenerator = \"wc\"\n[[operator]]\nname = \"split\"\nkind = \"wc_split\"\nsuccessors = [\"count\"]\n[[operator]]\nname = \"count\"\nkind = \"wc_count\"\nparams = { window = 10 }\n",
    )
    .unwrap();
    let (code, out, err) = clasp(&[
        "oracle",
        "--app-file",
        good.to_str().unwrap(),
        "--records",
        "50",
        "--seed",
        "3",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("\"app\": \"wc10\""));
    let bad = dir.join("cycle.toml");
    std::fs::write(
        &bad,
        "name = \"c\"\ngenerator = \"wc\"\n[[operator]]\nname = \"a\"\nkind = \"wc_split\"\nsuccessors = [\"b\"]\n[[operator]]\nname = \"b\"\nkind = \"forward\"\nsuccessors = [\"c\"]\n[[operator]]\nname = \"c\"\nkind = \"forward\"\nsuccessors = [\"b\"]\n",
    )
    .unwrap();
    let (code, _, err) = clasp(&[
        "oracle",
        "--app-file",
        bad.to_str().unwrap(),
        "--records",
        "5",
        "--seed",
        "1",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("cycle: b → c → b"), "{err}");
    assert_eq!(
        clasp(&[
            "oracle",
            "--app-file",
            "/nonexistent.toml",
            "--records",
            "5",
            "--seed",
            "1"
        ])
        .0,
        2
    );
    assert_eq!(
        clasp(&["oracle", "--app", "nope", "--records", "5", "--seed", "1"]).0,
        2
    );
    assert_eq!(
        clasp(&["oracle", "--app", "wc", "--records", "-5", "--seed", "1"]).0,
        2
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn gen_writes_records() {
    let (code, out, _) = clasp(&["gen", "--app", "sd", "--records", "3", "--seed", "1"]);
    assert_eq!(code, 0);
    assert_eq!(out.lines().count(), 3);
    assert_eq!(
        out,
        clasp(&["gen", "--app", "sd", "--records", "3", "--seed", "1"]).1
    );
    assert_eq!(
        clasp(&["gen", "--app", "zz", "--records", "3", "--seed", "1"]).0,
        2
    );
}
