//! App specs: the built-in apps, app-file validation errors, composition.

use clasp_operators::{AppSpec, SpecError, apps, oracle};

#[test]
fn builtin_operator_counts() {
    let counts: Vec<(String, usize)> = apps::builtin_names()
        .iter()
        .map(|n| (n.to_string(), apps::builtin(n).unwrap().operators.len()))
        .collect();
    let expect = [
        ("wc", 2),
        ("sd", 2),
        ("aa", 5),
        ("pl", 6),
        ("nwm", 10),
        ("etl", 10),
        ("syn", 10),
    ];
    assert_eq!(counts, expect.map(|(n, c)| (n.to_string(), c)));
    assert!(apps::builtin("nope").is_none());
}

#[test]
fn builtin_apps_round_trip_through_toml() {
    for name in apps::builtin_names() {
        let spec = apps::builtin(name).unwrap();
        let again = AppSpec::from_toml_str(&spec.to_toml_string()).unwrap();
        assert_eq!(again.operators, spec.operators, "{name}");
        assert_eq!(again.edges, spec.edges, "{name}");
    }
}

#[test]
fn an_app_files_run_table_is_kept_as_written_and_round_trips() {
    let wc = apps::builtin("wc").unwrap().to_toml_string();
    assert!(!wc.contains("[run]"), "built-in apps suggest no settings");
    let text = format!("{wc}\n[run]\npeak-rate = 5000.0\ncpus = [0, 1]\n");
    let spec = AppSpec::from_toml_str(&text).unwrap();
    let run = spec.def().run.as_ref().expect("the [run] table");
    assert_eq!(run["peak-rate"].as_float(), Some(5000.0));
    let again = AppSpec::from_toml_str(&spec.to_toml_string()).unwrap();
    assert_eq!(again.def(), spec.def());
}

fn err(text: &str) -> SpecError {
    AppSpec::from_toml_str(text).unwrap_err()
}

const HEAD: &str = "name = \"t\"\ngenerator = \"wc\"\n";

#[test]
fn validation_errors_name_the_problem() {
    let e = err(&format!(
        "{HEAD}[[operator]]\nname = \"a\"\nkind = \"wc_split\"\nsuccessors = [\"b\"]\n[[operator]]\nname = \"b\"\nkind = \"forward\"\nsuccessors = [\"a\"]\n"
    ));
    assert_eq!(e, SpecError::NoSource);
    let e = err(&format!(
        "{HEAD}[[operator]]\nname = \"a\"\nkind = \"wc_split\"\nsuccessors = [\"b\"]\n[[operator]]\nname = \"b\"\nkind = \"forward\"\nsuccessors = [\"c\"]\n[[operator]]\nname = \"c\"\nkind = \"forward\"\nsuccessors = [\"b\"]\n"
    ));
    assert_eq!(
        e,
        SpecError::Cycle(vec!["b".into(), "c".into(), "b".into()])
    );
    assert_eq!(e.to_string(), "cycle: b → c → b");
    let e = err(&format!(
        "{HEAD}[[operator]]\nname = \"a\"\nkind = \"wc_splitter\"\n"
    ));
    assert!(
        matches!(&e, SpecError::UnknownKind { operator, kind, .. } if operator == "a" && kind == "wc_splitter"),
        "{e}"
    );
    let e = err(&format!(
        "{HEAD}[[operator]]\nname = \"a\"\nkind = \"wc_split\"\nsuccessors = [\"zz\"]\n"
    ));
    assert_eq!(e.to_string(), "operator `a`: unknown successor `zz`");
    let e = err(&format!(
        "{HEAD}[[operator]]\nname = \"a\"\nkind = \"wc_split\"\n[[operator]]\nname = \"b\"\nkind = \"forward\"\nsuccessors = [\"c\"]\n[[operator]]\nname = \"c\"\nkind = \"forward\"\n"
    ));
    assert_eq!(e.to_string(), "unreachable from the source `a`: b, c");
    let e = err(&format!(
        "{HEAD}[[operator]]\nname = \"a\"\nkind = \"wc_count\"\nparams = {{ window = 0 }}\n"
    ));
    assert!(e.to_string().contains("`window` = 0 is outside"), "{e}");
    let e = err(&format!(
        "{HEAD}[[operator]]\nname = \"a\"\nkind = \"sd_spike_detect\"\nparams = {{ threshold = -1.0 }}\n"
    ));
    assert!(e.to_string().contains("`threshold` = -1 is outside"), "{e}");
    let e = err(&format!(
        "{HEAD}[[operator]]\nname = \"a\"\nkind = \"wc_count\"\nparams = {{ windw = 3 }}\n"
    ));
    assert!(e.to_string().contains("unknown parameter(s): windw"), "{e}");
    let e = err(&format!(
        "{HEAD}[[operator]]\nname = \"a\"\nkind = \"forward\"\n[[operator]]\nname = \"a\"\nkind = \"forward\"\n"
    ));
    assert_eq!(e, SpecError::DuplicateOperator("a".into()));
    let e =
        err("name = \"t\"\ngenerator = \"nope\"\n[[operator]]\nname = \"a\"\nkind = \"forward\"\n");
    assert!(matches!(e, SpecError::UnknownGenerator(_)));
    let e = err(&format!(
        "{HEAD}[[operator]]\nname = \"a\"\nkind = \"forward\"\nsucessors = []\n"
    ));
    assert!(
        matches!(e, SpecError::Toml(_)),
        "typo'd field is refused: {e}"
    );
    assert!(matches!(err(HEAD), SpecError::Empty(_)));
    assert!(matches!(
        AppSpec::from_toml_file("/nonexistent/app.toml"),
        Err(SpecError::Io { .. })
    ));
}

/// Names go into decision lines, logs and CSV files as they are: one that is empty, or holds
/// whitespace, a control character or a separator of those outputs, is refused naming it;
/// other characters (letters of any script, `-`, `_`, `.`) are names.
#[test]
fn names_the_outputs_cannot_carry_are_refused() {
    for bad in [
        "",
        "sp lit",
        "sp,lit",
        "a\\nb",
        "nul\\u0000",
        "k=v",
        "a:b",
        "tab\\t",
    ] {
        let e = err(&format!(
            "{HEAD}[[operator]]\nname = \"{bad}\"\nkind = \"forward\"\n"
        ));
        assert!(
            matches!(
                &e,
                SpecError::BadName {
                    what: "operator",
                    ..
                }
            ),
            "{bad:?}: {e}"
        );
    }
    let e = err(
        "name = \"my app\"\ngenerator = \"wc\"\n[[operator]]\nname = \"a\"\nkind = \"forward\"\n",
    );
    assert!(e.to_string().starts_with("app name \"my app\""), "{e}");
    for good in ["wörter", "split-2", "count_all", "v1.2"] {
        let text = format!("{HEAD}[[operator]]\nname = \"{good}\"\nkind = \"forward\"\n");
        assert!(AppSpec::from_toml_str(&text).is_ok(), "{good:?}");
    }
}

#[test]
fn compose_a_20_stage_syn_and_a_windowed_wc() {
    let mut text = String::from("name = \"syn20\"\ngenerator = \"syn\"\n");
    for i in 1..=20 {
        text += &format!("[[operator]]\nname = \"s{i}\"\nkind = \"forward\"\n");
        if i < 20 {
            text += &format!("successors = [\"s{}\"]\n", i + 1);
        }
    }
    let syn20 = AppSpec::from_toml_str(&text).unwrap();
    let r = oracle::run(&syn20, 50, 1);
    assert_eq!(r.processed.len(), 20);
    assert!(r.processed.values().all(|&n| n == 50));
    assert_eq!(r.outputs_emitted["s20"], 50);

    let wc100 = AppSpec::from_toml_str(
        "name = \"wc100\"\ngenerator = \"wc\"\n[[operator]]\nname = \"split\"\nkind = \"wc_split\"\nsuccessors = [\"count\"]\n[[operator]]\nname = \"count\"\nkind = \"wc_count\"\nparams = { window = 100 }\n",
    )
    .unwrap();
    let a = oracle::run(&wc100, 500, 1);
    let b = oracle::run(&apps::builtin("wc").unwrap(), 500, 1);
    assert_eq!(
        a.operators["count"].state, b.operators["count"].state,
        "same counts"
    );
    assert!(a.outputs_emitted["count"] < b.outputs_emitted["count"] / 50);
}

#[test]
fn comparison_flags_follow_apps_md() {
    let pl = apps::builtin("pl").unwrap();
    let agg = &pl.operators[pl.index_of("aggregate").unwrap()];
    assert!(agg.compare_state && !agg.compare_outputs);
    assert!(
        !pl.operators[pl.index_of("sink").unwrap()].compare_outputs,
        "downstream of running averages"
    );
    let nwm = apps::builtin("nwm").unwrap();
    let join = &nwm.operators[nwm.index_of("join").unwrap()];
    assert!(join.compare_inputs && !join.compare_state && !join.compare_outputs);
    let etl = apps::builtin("etl").unwrap();
    assert!(
        etl.operators.iter().all(|o| o.compare_outputs),
        "store's write notices are order-free"
    );
    assert!(
        apps::builtin("syn")
            .unwrap()
            .to_dot()
            .starts_with("digraph \"syn\"")
    );
}
