//! The HTTP endpoint: `GET /metrics` (Prometheus text format) and `GET /healthz`, served by a
//! thread of its own with a blocking server — nothing of it runs on the data path.

use anyhow::Context as _;
use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long the serving thread waits for a request before it checks whether to stop.
const POLL_INTERVAL: Duration = Duration::from_millis(100);
/// The exposition format's content type.
const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A running endpoint; dropping it stops the thread.
pub struct MetricsServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl MetricsServer {
    /// Binds `addr` and serves `registry` until dropped. A port already in use, or an address
    /// this host does not have, is an error naming the address.
    pub fn start(addr: SocketAddr, registry: Arc<Mutex<Registry>>) -> anyhow::Result<Self> {
        let server = tiny_http::Server::http(addr)
            .map_err(|e| anyhow::anyhow!("{e}"))
            .with_context(|| format!("--metrics-listen {addr}: cannot listen"))?;
        let bound = server
            .server_addr()
            .to_ip()
            .context("the metrics endpoint is not an IP socket")?;
        let stop = Arc::new(AtomicBool::new(false));
        let thread = std::thread::Builder::new()
            .name("clasp-metrics".into())
            .spawn({
                let stop = Arc::clone(&stop);
                move || serve(&server, &registry, &stop)
            })
            .context("starting the metrics thread")?;
        Ok(MetricsServer {
            addr: bound,
            stop,
            thread: Some(thread),
        })
    }

    /// The address it listens on (the real port when `:0` was asked for).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve(server: &tiny_http::Server, registry: &Mutex<Registry>, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        let request = match server.recv_timeout(POLL_INTERVAL) {
            Ok(Some(r)) => r,
            Ok(None) => continue,
            Err(e) => {
                tracing::warn!("metrics endpoint: {e}");
                continue;
            }
        };
        let response = respond(request.method(), request.url(), registry);
        // A scraper that went away is its problem, not the run's.
        let _ = request.respond(response);
    }
}

fn respond(
    method: &tiny_http::Method,
    url: &str,
    registry: &Mutex<Registry>,
) -> tiny_http::Response<std::io::Cursor<Vec<u8>>> {
    let path = url.split('?').next().unwrap_or("");
    let text = |code: u16, body: String, content_type: &str| {
        let header = tiny_http::Header::from_bytes("Content-Type", content_type)
            .expect("a valid static header");
        tiny_http::Response::from_string(body)
            .with_status_code(code)
            .with_header(header)
    };
    if *method != tiny_http::Method::Get {
        return text(405, "only GET\n".into(), "text/plain");
    }
    match path {
        "/metrics" => {
            let mut body = String::new();
            let r = registry.lock().unwrap_or_else(|e| e.into_inner());
            match encode(&mut body, &r) {
                Ok(()) => text(200, body, CONTENT_TYPE),
                Err(_) => text(500, "encoding the metrics failed\n".into(), "text/plain"),
            }
        }
        "/healthz" => text(200, "ok\n".into(), "text/plain"),
        _ => text(
            404,
            "not found: try /metrics or /healthz\n".into(),
            "text/plain",
        ),
    }
}
