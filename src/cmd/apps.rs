//! `clasp apps`, `clasp gen`, `clasp oracle`: the benchmark apps, their input generators and
//! the single-threaded reference run every distributed run is compared with.

use std::io::Write;

use anyhow::Context as _;
use clap::{Args, Subcommand};
use clasp_operators::{AppSpec, SpecError, apps, generate, oracle};

use super::{output, usage_error};

#[derive(Args)]
pub struct AppsArgs {
    /// Print JSON instead of a table (before or after `show NAME`).
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Option<AppsCommand>,
}

#[derive(Subcommand)]
enum AppsCommand {
    /// One app: operators, kinds, keys, state, determinism and edges.
    Show {
        /// App name (see `clasp apps`).
        name: String,
        /// Print a Graphviz `dot` graph instead.
        #[arg(long, conflicts_with = "toml")]
        dot: bool,
        /// Print the app in app-file (TOML) form, a template for `--app-file`.
        #[arg(long)]
        toml: bool,
    },
}

#[derive(Args)]
pub struct GenArgs {
    /// App whose generator to run.
    #[arg(long)]
    app: String,
    /// Number of records.
    #[arg(long)]
    records: u64,
    /// Generator seed (1, as for `clasp local` and `clasp run`, unless given).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Write to this file instead of stdout.
    #[arg(long)]
    out: Option<std::path::PathBuf>,
    /// Prefix each record with its source key in hex and a tab.
    #[arg(long)]
    keys: bool,
}

#[derive(Args)]
pub struct OracleArgs {
    /// Built-in app name.
    #[arg(
        long,
        required_unless_present = "app_file",
        conflicts_with = "app_file"
    )]
    app: Option<String>,
    /// App file (TOML; see the `clasp-operators` crate docs for the format).
    #[arg(long)]
    app_file: Option<std::path::PathBuf>,
    /// Number of input records.
    #[arg(long)]
    records: u64,
    /// Generator seed (1, as for `clasp local` and `clasp run`, unless given).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

/// The app of `--app NAME` or `--app-file FILE` (exactly one), with a usage error otherwise.
pub fn load_app(app: Option<&str>, app_file: Option<&std::path::Path>) -> anyhow::Result<AppSpec> {
    match (app, app_file) {
        // Kinds from this process's registry: the built-in ones plus a user's own binary's.
        (_, Some(path)) => {
            AppSpec::from_toml_file_with(crate::registry::get(), path).map_err(|e| match e {
                // A read error names the file already; a bad app names only what is wrong
                // (a TOML error says "app file: ..." without saying which).
                SpecError::Io { .. } => usage_error(e.to_string()),
                SpecError::Toml(why) => usage_error(format!("app file {}: {why}", path.display())),
                e => usage_error(format!("app file {}: {e}", path.display())),
            })
        }
        (Some(name), None) => builtin(name),
        (None, None) => Err(usage_error("give --app NAME or --app-file FILE")),
    }
}

fn builtin(name: &str) -> anyhow::Result<AppSpec> {
    apps::builtin(name).ok_or_else(|| {
        usage_error(format!(
            "unknown app `{name}` (known: {})",
            apps::all_names().join(", ")
        ))
    })
}

pub fn run_apps(args: AppsArgs) -> anyhow::Result<()> {
    let mut out = output::stdout();
    match args.command {
        None => list(&mut out, args.json)?,
        Some(AppsCommand::Show { name, dot, toml }) => show(&mut out, &name, dot, toml, args.json)?,
    }
    out.finish()
}

fn list(out: &mut impl Write, json: bool) -> anyhow::Result<()> {
    let specs: Vec<AppSpec> = apps::all_names()
        .iter()
        .map(|n| builtin(n))
        .collect::<Result<_, _>>()?;
    if json {
        let v: Vec<serde_json::Value> = specs
            .iter()
            .map(|s| {
                serde_json::json!({
                    "name": s.name,
                    "operators": s.operators.len(),
                    "stateful": s.operators.iter().filter(|o| o.stateful).count(),
                    "edges": s.edges.len(),
                    "description": s.description,
                })
            })
            .collect();
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
        return Ok(());
    }
    // The name column as wide as the longest name (`wc-text`), a user's own apps included.
    let w = specs
        .iter()
        .map(|s| s.name.len())
        .chain([3])
        .max()
        .unwrap_or(3);
    writeln!(
        out,
        "{:<w$} {:>9} {:>8} {:>5}  description",
        "app", "operators", "stateful", "edges"
    )?;
    for s in &specs {
        writeln!(
            out,
            "{:<w$} {:>9} {:>8} {:>5}  {}",
            s.name,
            s.operators.len(),
            s.operators.iter().filter(|o| o.stateful).count(),
            s.edges.len(),
            s.description
        )?;
    }
    Ok(())
}

fn show(out: &mut impl Write, name: &str, dot: bool, toml: bool, json: bool) -> anyhow::Result<()> {
    let spec = builtin(name)?;
    if dot {
        write!(out, "{}", spec.to_dot())?;
        return Ok(());
    }
    if toml {
        write!(out, "{}", spec.to_toml_string())?;
        return Ok(());
    }
    let succ_names = |i: usize| -> Vec<String> {
        spec.successors(i)
            .into_iter()
            .map(|s| spec.operators[s].name.clone())
            .collect()
    };
    if json {
        let ops: Vec<serde_json::Value> = spec
            .operators
            .iter()
            .enumerate()
            .map(|(i, o)| {
                serde_json::json!({
                    "name": o.name, "kind": o.kind, "stateful": o.stateful, "keyed_by": o.keyed_by,
                    "determinism": o.determinism.as_str(), "successors": succ_names(i),
                    "compare_state": o.compare_state, "compare_outputs": o.compare_outputs,
                    "compare_inputs": o.compare_inputs,
                })
            })
            .collect();
        let v = serde_json::json!({"name": spec.name, "description": spec.description,
            "generator": spec.generator, "source": spec.operators[spec.source].name, "operators": ops});
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
        return Ok(());
    }
    writeln!(
        out,
        "{} — {} (generator `{}`)",
        spec.name, spec.description, spec.generator
    )?;
    writeln!(
        out,
        "{:<16} {:<20} {:<8} {:<22} {:<13} {:<9} successors",
        "operator", "kind", "state", "keyed/routed by", "determinism", "compared"
    )?;
    for (i, o) in spec.operators.iter().enumerate() {
        let mut compared = Vec::new();
        if o.compare_state {
            compared.push("state");
        }
        if o.compare_outputs {
            compared.push("out");
        }
        if o.compare_inputs {
            compared.push("in");
        }
        writeln!(
            out,
            "{:<16} {:<20} {:<8} {:<22} {:<13} {:<9} {}",
            o.name,
            o.kind,
            if o.stateful { "keyed" } else { "-" },
            o.keyed_by,
            o.determinism.as_str(),
            if compared.is_empty() {
                "-".to_owned()
            } else {
                compared.join("+")
            },
            succ_names(i).join(", ")
        )?;
    }
    Ok(())
}

pub fn run_gen(args: GenArgs) -> anyhow::Result<()> {
    let spec = builtin(&args.app)?;
    let generator = generate::generator(&spec.generator, args.seed).expect("built-in generator");
    let sink: Box<dyn std::io::Write> = match &args.out {
        None => Box::new(output::stdout()),
        Some(path) => Box::new(
            std::fs::File::create(path)
                .map_err(|e| usage_error(format!("cannot create {}: {e}", path.display())))?,
        ),
    };
    let mut w = std::io::BufWriter::with_capacity(1 << 16, sink);
    let (mut key, mut payload) = (Vec::new(), Vec::new());
    let mut write_all = || -> std::io::Result<()> {
        for i in 0..args.records {
            generator.record_into(i, &mut key, &mut payload);
            if args.keys {
                for b in &key {
                    write!(w, "{b:02x}")?;
                }
                w.write_all(b"\t")?;
            }
            w.write_all(&payload)?;
            w.write_all(b"\n")?;
        }
        w.flush()
    };
    write_all().with_context(|| match &args.out {
        Some(path) => format!("writing records to {}", path.display()),
        None => "writing records".to_owned(),
    })
}

pub fn run_oracle(args: OracleArgs) -> anyhow::Result<()> {
    let spec = load_app(args.app.as_deref(), args.app_file.as_deref())?;
    let report = oracle::run(&spec, args.records, args.seed);
    let mut out = output::stdout();
    print_oracle(&mut out, &spec, &report, args.json)?;
    out.finish()
}

fn print_oracle(
    out: &mut impl Write,
    spec: &AppSpec,
    report: &oracle::OracleReport,
    json: bool,
) -> anyhow::Result<()> {
    if json {
        let state_digests: serde_json::Map<String, serde_json::Value> = report
            .operators
            .iter()
            .map(|(n, s)| (n.clone(), serde_json::Value::String(s.state.to_hex())))
            .collect();
        let v = serde_json::json!({
            "app": report.app,
            "records": report.records,
            "seed": report.seed,
            "state_digest": report.state_digest().to_hex(),
            "output_digest": report.output_digest().to_hex(),
            "processed": report.processed,
            "state_digests": state_digests,
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
        return Ok(());
    }
    writeln!(
        out,
        "app {}  records {}  seed {}",
        report.app, report.records, report.seed
    )?;
    writeln!(out, "state_digest  {}", report.state_digest())?;
    writeln!(out, "output_digest {}", report.output_digest())?;
    writeln!(
        out,
        "{:<16} {:>10} {:>10} {:>9} {:>10}  state digest",
        "operator", "processed", "outputs", "malformed", "state keys"
    )?;
    for o in &spec.operators {
        let s = &report.operators[&o.name];
        writeln!(
            out,
            "{:<16} {:>10} {:>10} {:>9} {:>10}  {}",
            o.name,
            s.processed,
            report.outputs_emitted[&o.name],
            s.malformed,
            report.state_keys[&o.name],
            s.state
        )?;
    }
    for ((from, to), n) in &report.emitted {
        let ratio = *n as f64 / report.processed[from].max(1) as f64;
        writeln!(
            out,
            "edge {from} → {to}: {n} chained requests ({ratio:.3} per request)"
        )?;
    }
    for (op, reasons) in &report.malformed {
        for (reason, n) in reasons {
            writeln!(out, "malformed at {op}: {n} × {reason}")?;
        }
    }
    Ok(())
}
