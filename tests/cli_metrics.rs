//! `clasp run --metrics-listen`: a scrape of a running live cluster, twice. Every family
//! `docs/metrics.md` lists is there, the counters rose between the scrapes, every metric the
//! Grafana dashboard in `deploy/` queries exists, and `--events` wrote the migrations.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// How long the run may take to start serving.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// `GET path` on `port`: the status code and the body (None while nothing listens).
fn get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let code = text.split_whitespace().nth(1)?.parse().ok()?;
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_owned())?;
    Some((code, body))
}

/// A port nothing listens on now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The sum of every sample of `name` (any labels).
fn total(scrape: &str, name: &str) -> f64 {
    scrape
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.split(['{', ' ']).next() == Some(name))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// The families the scrape declares (`# TYPE name type`).
fn families(scrape: &str) -> Vec<(String, String)> {
    scrape
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| {
            let (n, t) = l.split_once(' ')?;
            Some((n.to_owned(), t.to_owned()))
        })
        .collect()
}

/// `(family, type)` of every row of the table in docs/metrics.md.
fn documented() -> Vec<(String, String)> {
    let doc = include_str!("../docs/metrics.md");
    doc.lines()
        .filter_map(|l| {
            let mut cells = l.split('|').map(str::trim).skip(1);
            let name = cells.next()?.strip_prefix("`clasp_")?.strip_suffix('`')?;
            let kind = cells.next()?;
            Some((format!("clasp_{name}"), kind.to_owned()))
        })
        .collect()
}

/// Every `clasp_…` metric the dashboard's queries name, without sample suffixes.
fn dashboard_metrics() -> Vec<String> {
    let dash: serde_json::Value =
        serde_json::from_str(include_str!("../deploy/grafana/clasp.json")).expect("JSON");
    let mut out = Vec::new();
    for p in dash["panels"].as_array().expect("panels") {
        for t in p["targets"].as_array().expect("targets") {
            let expr = t["expr"].as_str().expect("expr");
            for (i, _) in expr.match_indices("clasp_") {
                let name: String = expr[i..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                let base = ["_total", "_bucket", "_sum", "_count"]
                    .iter()
                    .find_map(|s| name.strip_suffix(s))
                    .unwrap_or(&name)
                    .to_owned();
                out.push(base);
            }
        }
    }
    out
}

#[test]
fn a_running_cluster_is_scraped_twice() {
    let _turn = common::one_at_a_time();
    let port = free_port();
    let dir = tempfile_dir();
    let events = dir.join("events.jsonl");
    let listen = format!("127.0.0.1:{port}");
    let run = common::start(
        &[
            "run",
            "--max-workers",
            "2",
            "--pattern",
            "constant",
            "--peak-rate",
            "4000",
            "--duration",
            "8",
            "--metrics-listen",
            &listen,
            "--events",
            events.to_str().unwrap(),
        ],
        &[],
    );
    let deadline = Instant::now() + START_TIMEOUT;
    // Serving, and past the first interval with work in it.
    let first = loop {
        assert!(
            Instant::now() < deadline,
            "no scrape with processed requests"
        );
        if let Some((200, body)) = get(port, "/metrics")
            && total(&body, "clasp_operator_processed_total") > 0.0
        {
            break body;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(get(port, "/healthz").map(|r| r.0), Some(200));
    assert_eq!(get(port, "/nothing").map(|r| r.0), Some(404));
    std::thread::sleep(Duration::from_secs(2));
    let (code, second) = get(port, "/metrics").expect("still serving");
    assert_eq!(code, 200);
    let declared = families(&second);
    for (name, kind) in documented() {
        assert!(
            declared.contains(&(name.clone(), kind.clone())),
            "{name} ({kind}) is documented but not served: {declared:?}"
        );
    }
    assert!(declared.len() >= 18, "{declared:?}");
    for counter in [
        "clasp_operator_processed_total",
        "clasp_operator_exec_seconds_total",
        "clasp_chained_requests_total",
        "clasp_worker_frames_in_total",
        "clasp_latency_seconds_count",
        // Paced: every admitted record says how late it was.
        "clasp_admission_delay_seconds_count",
    ] {
        let (a, b) = (total(&first, counter), total(&second, counter));
        assert!(b > a, "{counter} did not rise: {a} then {b}");
    }
    assert!(total(&second, "clasp_planner_cost_microseconds") > 0.0);
    let names: Vec<&String> = declared.iter().map(|(n, _)| n).collect();
    for m in dashboard_metrics() {
        assert!(
            names.contains(&&m),
            "the dashboard queries {m}, which is not served"
        );
    }
    let out = run.wait();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&events).expect("events file");
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    assert!(
        lines
            .iter()
            .any(|e| e["event"] == "migration" && e["epoch"].as_u64().is_some()),
        "{text}"
    );
    // The planner's first decision (the placement the run starts with) is an event too.
    assert!(
        lines
            .iter()
            .any(|e| e["event"] == "decision" && e["t_s"].as_f64() == Some(0.0)),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_port_in_use_is_a_clear_error() {
    let _turn = common::one_at_a_time();
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = common::clasp(&["run", "--duration", "1", "--metrics-listen", &addr]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--metrics-listen") && err.contains(&addr),
        "{err}"
    );
}

fn tempfile_dir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("clasp-metrics-test-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}
