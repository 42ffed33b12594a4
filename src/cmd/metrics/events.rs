//! `--events FILE`: the planner's decisions and the completed migrations as they happen, one
//! JSON object per line, flushed per line so `tail -f` follows a run.

use anyhow::Context as _;
use clasp_dataplane::cluster::control::MigrationRecord;
use std::fs::File;
use std::io::{BufWriter, Write as _};
use std::path::{Path, PathBuf};

/// An open events file. A write that fails is reported once and the run goes on: the events
/// file is a view of the run, not its result.
pub struct EventLog {
    path: PathBuf,
    out: Option<BufWriter<File>>,
}

impl EventLog {
    /// Creates (or truncates) `path`; a path that cannot be created is an error naming it.
    pub fn create(path: &Path) -> anyhow::Result<Self> {
        let f = File::create(path).with_context(|| format!("--events {}", path.display()))?;
        Ok(EventLog {
            path: path.to_owned(),
            out: Some(BufWriter::new(f)),
        })
    }

    /// A decision of the planner at `t_s` (its one-line explanation).
    pub fn decision(&mut self, t_s: f64, line: &str) {
        self.write(serde_json::json!({"event": "decision", "t_s": t_s, "line": line}));
    }

    /// A completed migration, with every figure of its record.
    pub fn migration(&mut self, r: &MigrationRecord) {
        let mut v = serde_json::to_value(r).unwrap_or_default();
        v["event"] = "migration".into();
        self.write(v);
    }

    fn write(&mut self, v: serde_json::Value) {
        let Some(out) = self.out.as_mut() else {
            return;
        };
        let r = serde_json::to_writer(&mut *out, &v)
            .map_err(std::io::Error::from)
            .and_then(|()| out.write_all(b"\n"))
            .and_then(|()| out.flush());
        if let Err(e) = r {
            tracing::warn!(
                "--events {}: {e}; no more events are written",
                self.path.display()
            );
            self.out = None;
        }
    }
}
