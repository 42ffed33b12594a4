//! What a running job shows while it runs: a Prometheus endpoint (`--metrics-listen ADDR`)
//! and a file of the planner's decisions and migrations as JSON lines (`--events FILE`).
//!
//! Why the driver: it already receives every worker's cumulative counters each interval (the
//! planner's input), so exporting them costs the data plane nothing — no hot-path change, no
//! second reader of the workers' shared memory. The figures are as fresh as the metrics
//! interval (`--interval-ms`, 250 ms by default). Every family is listed in `docs/metrics.md`.

mod driver;
mod events;
mod histogram;
mod server;

pub use driver::DriverMetrics;
pub use events::EventLog;
pub use server::MetricsServer;

use clasp_controlplane::autoscale::Estimates;
use clasp_dataplane::cluster::control::{IntervalView, MigrationRecord};
use std::net::SocketAddr;
use std::path::Path;

/// Whatever of the endpoint and the events file a run asked for, fed by its controller.
#[derive(Default)]
pub struct Watch {
    metrics: Option<(DriverMetrics, MetricsServer)>,
    events: Option<EventLog>,
}

impl Watch {
    /// Starts the endpoint on `listen` and opens `events`, either optional; says on stderr
    /// where the endpoint listens. Fails before any worker starts when either cannot be had.
    pub fn start(
        listen: Option<SocketAddr>,
        events: Option<&Path>,
        spec: &clasp_operators::AppSpec,
    ) -> anyhow::Result<Self> {
        let metrics = match listen {
            Some(addr) => {
                let (m, registry) = DriverMetrics::new(spec);
                let server = MetricsServer::start(addr, registry)?;
                say!(
                    "{}: metrics on http://{}/metrics",
                    crate::cmd::run::who(),
                    server.addr()
                );
                Some((m, server))
            }
            None => None,
        };
        // Like --out, a path that cannot be written is a usage error (exit 2).
        let events = (events.map(EventLog::create).transpose())
            .map_err(|e| crate::cmd::usage_error(format!("{e:#}")))?;
        Ok(Watch { metrics, events })
    }

    /// One metrics interval, with the planner's estimates when it has some.
    pub fn on_interval(&mut self, v: &IntervalView, est: Option<&Estimates>) {
        if let Some((m, _)) = self.metrics.as_mut() {
            m.on_interval(v, est);
        }
    }

    /// The planner decided to move (its one-line explanation).
    pub fn on_decision(&mut self, t_s: f64, line: &str) {
        if let Some((m, _)) = self.metrics.as_ref() {
            m.on_decision();
        }
        if let Some(e) = self.events.as_mut() {
            e.decision(t_s, line);
        }
    }

    /// A migration completed.
    pub fn on_migrated(&mut self, r: &MigrationRecord) {
        if let Some((m, _)) = self.metrics.as_ref() {
            m.on_migrated(r);
        }
        if let Some(e) = self.events.as_mut() {
            e.migration(r);
        }
    }
}
