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

impl WorkerEntry {
    /// The address resolved, its port checked first: a bad port is named as one, not as a
    /// name that does not resolve (which is all the resolver would say of it).
    fn socket_addr(&self) -> Result<SocketAddr, String> {
        use std::net::ToSocketAddrs;
        let bad = |why: String| format!("worker {}: address {:?}: {why}", self.id, self.address);
        check_port(&self.address).map_err(bad)?;
        let addr = match self.address.to_socket_addrs() {
            Ok(mut addrs) => addrs
                .next()
                .ok_or_else(|| bad("cannot resolve: no address".into()))?,
            Err(e) => return Err(bad(format!("cannot resolve: {e}"))),
        };
        if addr.ip().is_unspecified() {
            return Err(bad(UNSPECIFIED.into()));
        }
        Ok(addr)
    }
}

/// Why port 0 is refused: a worker's address is where the others connect, and a worker that
/// binds port 0 gets one at random that none of them knows.
const PORT_ZERO: &str = "port 0 is chosen at random when the worker binds, so no other process \
                         would know it: give the port the others connect to";

/// Why `0.0.0.0` and `[::]` are refused: every other process would connect to itself.
const UNSPECIFIED: &str = "the unspecified address is where a worker may listen, not where the \
                           others reach it: give the address they connect to (and `clasp worker \
                           --listen 0.0.0.0:PORT` to listen on every interface)";

/// Refuses a `host:port` address without a usable port (1..=65535).
fn check_port(address: &str) -> Result<(), String> {
    // `[::1]` alone is an IPv6 host without a port, not port `1]`.
    let port = address.rsplit_once(':').map(|(_, p)| p);
    let Some(port) = port.filter(|p| !p.contains(']')) else {
        return Err("no port (HOST:PORT)".into());
    };
    match port.parse::<u16>() {
        Ok(0) => Err(PORT_ZERO.into()),
        Ok(_) => Ok(()),
        Err(_) => Err(format!("invalid port {port:?} (1..=65535)")),
    }
}

impl ClusterFile {
    /// Reads and checks the file, its addresses resolved: a malformed one, or one with an
    /// address no peer could connect to, is a usage error naming the path. Resolved here, not
    /// only in [`resolve`](Self::resolve), because a loaded file keeps no path for its errors to
    /// name.
    pub fn load(path: &Path) -> anyhow::Result<ClusterFile> {
        let text = crate::cmd::limits::read_text_file(path).map_err(|e| {
            usage_error(format!("reading the cluster file {}: {e}", path.display()))
        })?;
        let named = |e: String| usage_error(format!("cluster file {}: {e}", path.display()));
        let f: ClusterFile = toml::from_str(&text).map_err(|e| named(e.to_string()))?;
        f.check().map_err(named)?;
        f.resolved().map_err(named)?;
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
        self.resolved().map_err(usage_error)
    }

    /// [`resolve`](Self::resolve), its errors as text for [`load`](Self::load) to prefix.
    fn resolved(&self) -> Result<Vec<(PeerId, SocketAddr)>, String> {
        let resolved: Vec<(PeerId, SocketAddr)> = self
            .workers
            .iter()
            .map(|w| Ok((w.id, w.socket_addr()?)))
            .collect::<Result<_, String>>()?;
        for (i, (id, addr)) in resolved.iter().enumerate() {
            if let Some((other, _)) = resolved[..i].iter().find(|(_, a)| a == addr) {
                return Err(format!("workers {other} and {id} are both at {addr}"));
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

/// Bytes a secret file may hold past the longest secret: the trailing whitespace (a newline,
/// an editor's blank lines) that is removed from it.
const SECRET_FILE_SLACK_BYTES: usize = 4096;

/// The cluster secret from `file` (trailing whitespace removed) or else [`SECRET_ENV`]; never
/// from the command line, which any user can read in `ps`.
pub fn read_secret(file: Option<&Path>) -> anyhow::Result<ClusterSecret> {
    let bytes = match file {
        Some(p) => {
            // A usage error (exit 2), as an unreadable cluster file is: the command line names
            // what cannot be used.
            let max = clasp_dataplane::transport::auth::SECRET_MAX_BYTES;
            let most = (max + SECRET_FILE_SLACK_BYTES) as u64;
            let mut b = crate::cmd::limits::read_at_most(p, most).map_err(|e| {
                let why = match e.kind() {
                    std::io::ErrorKind::InvalidData => {
                        format!("far more than the {max} bytes a secret may hold")
                    }
                    _ => format!("cannot be read: {e}"),
                };
                usage_error(format!("--secret-file {}: {why}", p.display()))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A cluster file of workers 1, 2, ... at `addresses`.
    fn file_of(addresses: &[&str]) -> String {
        let mut text = "cluster_id = 7\n".to_string();
        for (i, a) in addresses.iter().enumerate() {
            text += &format!("[[worker]]\nid = {}\naddress = \"{a}\"\n", i + 1);
        }
        text
    }

    /// What loading `text` from a file says, with the file's path.
    fn load_error(text: &str) -> (String, String) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cluster.toml");
        std::fs::write(&path, text).unwrap();
        let e = ClusterFile::load(&path).unwrap_err();
        assert_eq!(crate::cmd::exit_code(&e), 2, "{e:#}");
        (format!("{e:#}"), path.display().to_string())
    }

    #[test]
    fn a_port_is_refused_as_a_port_and_port_0_with_why() {
        assert_eq!(check_port("10.0.0.1:7001"), Ok(()));
        assert_eq!(check_port("[::1]:7001"), Ok(()));
        assert_eq!(check_port("db.example:65535"), Ok(()));
        for no_port in ["10.0.0.1", "[::1]", "host"] {
            assert_eq!(
                check_port(no_port),
                Err("no port (HOST:PORT)".into()),
                "{no_port}"
            );
        }
        assert_eq!(check_port("127.0.0.1:0"), Err(PORT_ZERO.into()));
        for (bad, port) in [("127.0.0.1:99999", "99999"), ("h:", ""), ("h:-1", "-1")] {
            assert_eq!(
                check_port(bad),
                Err(format!("invalid port {port:?} (1..=65535)")),
                "{bad}"
            );
        }
    }

    #[test]
    fn address_errors_name_the_file_and_the_worker() {
        for (addresses, says) in [
            (
                &["127.0.0.1:7001", "127.0.0.1:0"][..],
                format!("worker 2: address \"127.0.0.1:0\": {PORT_ZERO}"),
            ),
            (
                &["127.0.0.1:99999"][..],
                "worker 1: address \"127.0.0.1:99999\": invalid port \"99999\"".into(),
            ),
            (
                &["127.0.0.1:7001", "127.0.0.1:7001"][..],
                "workers 1 and 2 are both at 127.0.0.1:7001".into(),
            ),
            (
                &["0.0.0.0:7001"][..],
                format!("worker 1: address \"0.0.0.0:7001\": {UNSPECIFIED}"),
            ),
            (
                &["127.0.0.1:7001", "[::]:7002"][..],
                format!("worker 2: address \"[::]:7002\": {UNSPECIFIED}"),
            ),
        ] {
            let (e, path) = load_error(&file_of(addresses));
            assert!(e.starts_with(&format!("cluster file {path}: ")), "{e}");
            assert!(e.contains(&says), "{e}");
        }
    }

    #[test]
    fn good_addresses_resolve_in_file_order() {
        let f: ClusterFile = toml::from_str(&file_of(&[
            "127.0.0.1:7002",
            "[::1]:7001",
            "127.0.0.1:7001",
        ]))
        .unwrap();
        let got = f.resolve().unwrap();
        let want: Vec<(PeerId, SocketAddr)> = vec![
            (1, "127.0.0.1:7002".parse().unwrap()),
            (2, "[::1]:7001".parse().unwrap()),
            (3, "127.0.0.1:7001".parse().unwrap()),
        ];
        assert_eq!(got, want);
    }
}
