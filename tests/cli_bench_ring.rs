//! `clasp bench ring`, run as the built binary with tiny counts: every cell is measured, and
//! every implementation but shmring is compared with it repetition by repetition. Unpinned, so
//! it runs wherever the tests do (pinning needs two CPUs).

mod common;

use common::json;

#[test]
fn bench_ring_compares_shmring_with_each_other_cell_per_repetition() {
    // Two spinning threads a benchmark: two at once on a 2-vCPU machine spin on cores the
    // other needs (once took over 120 s where alone it takes about 10).
    let _turn = common::one_at_a_time();
    let out = common::clasp(&[
        "bench",
        "ring",
        "--impls",
        "floor,shmring,std_mpsc",
        "--sizes",
        "16",
        "--repetitions",
        "2",
        "--round-trips",
        "200",
        "--messages",
        "2000",
        "--no-pin",
        "--json",
    ]);
    let v = json(&out);
    let rows = v["results"].as_array().unwrap();
    assert_eq!(rows.len(), 3, "{v}");
    for row in rows {
        assert!(row["one_way_ns"].as_f64().unwrap() > 0.0, "{row}");
        let against = &row["shmring_against"];
        match row["impl"].as_str().unwrap() {
            "shmring" => assert!(against.is_null(), "{row}"),
            "floor" => {
                assert!(against["one_way_ratio"]["median"].as_f64().unwrap() > 0.0);
                assert!(against["one_way_at_most"].as_u64().unwrap() <= 2);
                assert!(against["throughput_ratio"].is_null(), "{row}");
            }
            _ => {
                assert!(
                    against["throughput_ratio"]["min"].as_f64().unwrap() > 0.0,
                    "{row}"
                );
                assert!(against["throughput_at_least"].as_u64().unwrap() <= 2);
            }
        }
    }
}

#[test]
fn bench_ring_measures_the_frame_sizes_on_request_and_names_the_sizes_it_has() {
    // Two spinning threads a benchmark: two at once on a 2-vCPU machine spin on cores the
    // other needs (once took over 120 s where alone it takes about 10).
    let _turn = common::one_at_a_time();
    let out = common::clasp(&[
        "bench",
        "ring",
        "--impls",
        "shmring,std_mpsc",
        "--sizes",
        "32,80",
        "--repetitions",
        "1",
        "--round-trips",
        "200",
        "--messages",
        "2000",
        "--no-pin",
        "--json",
    ]);
    let v = json(&out);
    let rows = v["results"].as_array().unwrap();
    let bytes: Vec<u64> = rows.iter().map(|r| r["bytes"].as_u64().unwrap()).collect();
    assert_eq!(bytes, [32, 32, 80, 80], "{v}");
    let (code, _, stderr) = common::clasp_text(&["bench", "ring", "--sizes", "48"]);
    assert_ne!(code, 0);
    assert!(
        stderr.contains("48-byte") && stderr.contains("[32, 80]"),
        "{stderr}"
    );
    // std_mpsc runs a quarter of the round trips: fewer than 4 would be none (and an endless
    // latency).
    // Nor is a count that would run until killed taken.
    for (option, bad) in [
        ("--round-trips", "3"),
        ("--round-trips", "18446744073709551615"),
    ] {
        let (code, _, stderr) = common::clasp_text(&["bench", "ring", option, bad]);
        assert_eq!(code, 2, "{stderr}");
        assert!(
            stderr.contains(option) && stderr.contains("4.."),
            "{stderr}"
        );
    }
    for option in ["--records", "--remote-requests"] {
        let args = ["bench", "dispatch", option, "18446744073709551615"];
        let (code, _, stderr) = common::clasp_text(&args);
        assert_eq!(code, 2, "{stderr}");
        assert!(stderr.contains(option), "{stderr}");
    }
    let (code, _, stderr) = common::clasp_text(&["bench", "ring", "--sizes", "16,64,16"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--sizes: 16 given twice"), "{stderr}");
}
