//! `clasp bench wc` as text: throughput, CPU a sentence (and clasp's by thread), cores busy.

use super::{SEED, WcBenchReport, WcRow};
use crate::dispatch_local::Spread3;

/// The report as text.
pub fn table(r: &WcBenchReport) -> String {
    let mut s = format!(
        "machine: {}\nword count, {} sentences of 10 Zipf words (seed {SEED}), median \
         [min..max] of {} repetitions, sentences/s:\n",
        r.machine, r.records, r.repetitions
    );
    s += &format!(
        "{:>9}  {:>28}  {:>28}  {:>6}  {:>10}  {}\n",
        "executors", "clasp", "timely", "ratio", "words", "outputs equal"
    );
    for row in &r.rows {
        let cell = |s: Option<Spread3>, none: &str| spread_cell(s, 0, none);
        let none = if r.timely_built {
            "not run"
        } else {
            "not built"
        };
        let timely = cell(row.timely_sentences_per_s, none);
        s += &format!(
            "{:>9}  {:>28}  {:>28}  {:>6}  {:>10}  {}\n",
            row.executors,
            cell(row.clasp_sentences_per_s, "not run"),
            timely,
            row.ratio.map_or("-".into(), |x| format!("{x:.2}x")),
            row.words,
            row.digests_equal.map_or("-".into(), |e| e.to_string()),
        );
    }
    s += &cpu_table(r);
    s += &clasp_cpu_table(r);
    s += &cores_table(r);
    if !r.timely_built {
        s += "the timely dataflow baseline is not built: build with `--features baselines` \
              (cargo run --release --features baselines -- bench wc)\n";
    }
    s
}

/// CPU per sentence of each system (user + system of the whole process over each run), µs.
fn cpu_table(r: &WcBenchReport) -> String {
    let mut s = "CPU per sentence, µs (user + system of the whole process over each run), \
                 median [min..max]:\n"
        .to_string();
    s += &format!(
        "{:>9}  {:>28}  {:>28}  {:>28}  {:>6}\n",
        "executors", "clasp", "clasp's executors", "timely", "ratio"
    );
    let cell = |s: Option<Spread3>| spread_cell(s, 3, "-");
    for row in &r.rows {
        let (c, t) = (
            row.clasp_cpu_us_per_sentence,
            row.timely_cpu_us_per_sentence,
        );
        // timely ÷ clasp, so that above 1 means clasp used less CPU, as in the table above.
        let ratio = c.zip(t).map(|(c, t)| t.median / c.median);
        s += &format!(
            "{:>9}  {:>28}  {:>28}  {:>28}  {:>6}\n",
            row.executors,
            cell(c),
            cell(row.clasp_executor_cpu_us_per_sentence),
            cell(t),
            ratio.map_or("-".into(), |x| format!("{x:.2}x")),
        );
    }
    s
}

/// Where clasp's CPU per sentence goes, by thread (each thread's own CPU clock), µs.
fn clasp_cpu_table(r: &WcBenchReport) -> String {
    if r.rows
        .iter()
        .all(|row| row.clasp_cpu_us_per_sentence.is_none())
    {
        return String::new();
    }
    spread_table(
        r,
        "clasp's CPU per sentence by thread, µs (each thread's own clock; the coordinator's \
         includes the worker's setup)",
        &["executors", "ingress", "coordinator"],
        3,
        |row| {
            vec![
                row.clasp_executor_cpu_us_per_sentence,
                row.clasp_ingress_cpu_us_per_sentence,
                row.clasp_coordinator_cpu_us_per_sentence,
            ]
        },
    )
}

/// Cores each system kept busy (CPU seconds ÷ wall seconds over each run).
fn cores_table(r: &WcBenchReport) -> String {
    spread_table(
        r,
        "cores kept busy (CPU seconds ÷ wall seconds of the whole process over each run)",
        &["clasp", "timely"],
        2,
        |row| vec![row.clasp_cores_busy, row.timely_cores_busy],
    )
}

/// A table of `title`: a row per executor count, a `median [min..max]` cell per column.
fn spread_table(
    r: &WcBenchReport,
    title: &str,
    columns: &[&str],
    digits: usize,
    cells: impl Fn(&WcRow) -> Vec<Option<Spread3>>,
) -> String {
    let mut s = format!("{title}, median [min..max]:\n{:>9}", "executors");
    for c in columns {
        s += &format!("  {c:>28}");
    }
    s.push('\n');
    for row in &r.rows {
        s += &format!("{:>9}", row.executors);
        for cell in cells(row) {
            s += &format!("  {:>28}", spread_cell(cell, digits, "-"));
        }
        s.push('\n');
    }
    s
}

/// A spread as `median [min..max]` with `digits` decimals, or `none`.
fn spread_cell(s: Option<Spread3>, digits: usize, none: &str) -> String {
    s.map_or(none.to_string(), |s| {
        format!(
            "{:.digits$} [{:.digits$}..{:.digits$}]",
            s.median, s.min, s.max
        )
    })
}
