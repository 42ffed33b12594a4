//! The cluster file and the cluster secret: what every process of a cluster reads to find its
//! peers and to prove it belongs. Kept apart from the commands because `clasp worker`,
//! `clasp run` and `clasp planner` read them alike, and `clasp run --workers N` writes one.

use crate::cmd::usage_error;
use clasp_dataplane::transport::{ClusterSecret, MAX_PEER_ID, PeerId};
use std::net::SocketAddr;
use std::path::Path;

/// The environment variable holding the cluster secret (when no `--secret-file`).
pub const SECRET_ENV: &str = "CLASP_CLUSTER_SECRET";

/// The cluster file (TOML; docs/cluster.md).
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterFile {
    /// Bound into every handshake: workers of another cluster are refused.
    pub cluster_id: u64,
    /// The workers, in the order key groups are spread over.
    #[serde(rename = "worker")]
    pub workers: Vec<WorkerEntry>,
}

/// One worker of a cluster file.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkerEntry {
    /// 1..=4095 (0 is the driver).
    pub id: u32,
    /// `host:port` other workers and the driver connect to.
    pub address: String,
}

impl ClusterFile {
    /// Reads and checks the file; a malformed one is a usage error naming the path.
    pub fn load(path: &Path) -> anyhow::Result<ClusterFile> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            usage_error(format!("reading the cluster file {}: {e}", path.display()))
        })?;
        let f: ClusterFile = toml::from_str(&text)
            .map_err(|e| usage_error(format!("cluster file {}: {e}", path.display())))?;
        f.check()
            .map_err(|e| usage_error(format!("cluster file {}: {e}", path.display())))?;
        Ok(f)
    }

    fn check(&self) -> Result<(), String> {
        if self.workers.is_empty() {
            return Err("no [[worker]]".into());
        }
        let mut seen = std::collections::BTreeSet::new();
        for w in &self.workers {
            if w.id == 0 || w.id > MAX_PEER_ID {
                return Err(format!("worker id {} is not in 1..={MAX_PEER_ID}", w.id));
            }
            if !seen.insert(w.id) {
                return Err(format!("worker id {} appears twice", w.id));
            }
        }
        Ok(())
    }

    /// Every worker's id and resolved address, in file order; two workers at one address are
    /// refused (each would dial itself for the other).
    pub fn resolve(&self) -> anyhow::Result<Vec<(PeerId, SocketAddr)>> {
        let resolved: Vec<(PeerId, SocketAddr)> = self
            .workers
            .iter()
            .map(|w| {
                use std::net::ToSocketAddrs;
                let a = w
                    .address
                    .to_socket_addrs()
                    .ok()
                    .and_then(|mut i| i.next())
                    .ok_or_else(|| {
                        let port = if w.address.rsplit_once(':').is_none() {
                            " (no port: HOST:PORT)"
                        } else {
                            ""
                        };
                        usage_error(format!(
                            "worker {}: cannot resolve {:?}{port}",
                            w.id, w.address
                        ))
                    })?;
                Ok((w.id, a))
            })
            .collect::<anyhow::Result<_>>()?;
        for (i, (id, addr)) in resolved.iter().enumerate() {
            if let Some((other, _)) = resolved[..i].iter().find(|(_, a)| a == addr) {
                return Err(usage_error(format!(
                    "workers {other} and {id} are both at {addr}"
                )));
            }
        }
        Ok(resolved)
    }

    /// The file as TOML, as `clasp run --workers N` writes it for the workers it starts.
    pub fn to_toml(&self) -> String {
        let mut s = format!(
            "# written by clasp run --static\ncluster_id = {}\n",
            self.cluster_id
        );
        for w in &self.workers {
            s.push_str(&format!(
                "\n[[worker]]\nid = {}\naddress = \"{}\"\n",
                w.id, w.address
            ));
        }
        s
    }
}

/// The cluster secret from `file` (trailing whitespace removed) or else [`SECRET_ENV`]; never
/// from the command line, which any user can read in `ps`.
pub fn read_secret(file: Option<&Path>) -> anyhow::Result<ClusterSecret> {
    let bytes = match file {
        Some(p) => {
            // A usage error (exit 2), as an unreadable cluster file is: the command line names
            // what cannot be used.
            let mut b = std::fs::read(p).map_err(|e| {
                usage_error(format!(
                    "--secret-file {}: cannot be read: {e}",
                    p.display()
                ))
            })?;
            while b.last().is_some_and(|c| c.is_ascii_whitespace()) {
                b.pop();
            }
            b
        }
        None => std::env::var(SECRET_ENV)
            .map_err(|_| {
                usage_error(format!(
                    "no cluster secret: give --secret-file PATH or set {SECRET_ENV}"
                ))
            })?
            .into_bytes(),
    };
    let from = match file {
        Some(p) => format!("--secret-file {}", p.display()),
        None => SECRET_ENV.to_string(),
    };
    ClusterSecret::new(bytes).map_err(|e| usage_error(format!("{from}: {e}")))
}
