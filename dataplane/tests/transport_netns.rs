//! Two transports in two network namespaces joined by a veth pair (no `netem` on this kernel:
//! delay and cuts come from the transport's fault injection). Skipped, with the reason
//! printed, where namespaces cannot be made (not root, no `ip`, a sandbox).

mod transport_support;
use clasp_dataplane::transport::{Limits, Transport};
use std::os::fd::AsRawFd;
use std::process::Command;
use transport_support::*;

struct Netns {
    names: [String; 2],
}

impl Drop for Netns {
    fn drop(&mut self) {
        for n in &self.names {
            let _ = Command::new("ip").args(["netns", "del", n]).status();
        }
    }
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn make() -> Result<Netns, String> {
    let tag = std::process::id();
    let ns = Netns {
        names: [format!("clasp-t{tag}-a"), format!("clasp-t{tag}-b")],
    };
    let (a, b) = (&ns.names[0], &ns.names[1]);
    let (va, vb) = (format!("cva{tag}"), format!("cvb{tag}"));
    ip(&["netns", "add", a])?;
    ip(&["netns", "add", b])?;
    ip(&["link", "add", &va, "type", "veth", "peer", "name", &vb])?;
    ip(&["link", "set", &va, "netns", a])?;
    ip(&["link", "set", &vb, "netns", b])?;
    ip(&["-n", a, "addr", "add", "10.77.0.1/24", "dev", &va])?;
    ip(&["-n", b, "addr", "add", "10.77.0.2/24", "dev", &vb])?;
    for (n, v) in [(a, &va), (b, &vb)] {
        ip(&["-n", n, "link", "set", v, "up"])?;
        ip(&["-n", n, "link", "set", "lo", "up"])?;
    }
    Ok(ns)
}

/// Runs `f` on a new thread that has entered namespace `name` (threads created from it,
/// such as the transport's connect and handshake threads, inherit it).
fn in_netns<T: Send + 'static>(
    name: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::thread::JoinHandle<T> {
    let path = format!("/var/run/netns/{name}");
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).expect("netns file");
        // SAFETY: setns on an open namespace fd; affects only this thread.
        let r = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(r, 0, "setns: {}", std::io::Error::last_os_error());
        f()
    })
}

#[test]
fn two_transports_in_two_namespaces_exchange_over_veth() {
    init_logs();
    let ns = match make() {
        Ok(ns) => ns,
        Err(reason) => {
            println!("skipped: network namespaces unavailable: {reason}");
            return;
        }
    };
    let count = 5_000;
    let start = |id: u32, ip: &'static str, peer: (u32, &'static str)| {
        move || {
            let mut c = config(id, Limits::default());
            c.listen = format!("{ip}:7411").parse().unwrap();
            c.peers
                .push((peer.0, format!("{}:7411", peer.1).parse().unwrap()));
            let mut ts = vec![Transport::start(c).unwrap()];
            let mut rs = vec![Recorder::default()];
            let mut out = Outbox::new(id, &[peer.0], count, 16, 2);
            pump(&mut ts, &mut rs, |ts, rs| {
                if ts[0].is_connected(peer.0) {
                    out.push(&mut ts[0]);
                }
                rs[0].from(peer.0).len() == count as usize && out.is_empty()
            });
            // Keep serving until the other side has had time to take what it needs.
            let end = std::time::Instant::now() + std::time::Duration::from_millis(300);
            while std::time::Instant::now() < end {
                ts[0]
                    .poll(std::time::Duration::from_millis(5), &mut rs[0])
                    .unwrap();
            }
            rs.pop().unwrap().from(peer.0)
        }
    };
    let a = in_netns(&ns.names[0], start(1, "10.77.0.1", (2, "10.77.0.2")));
    let b = in_netns(&ns.names[1], start(2, "10.77.0.2", (1, "10.77.0.1")));
    let (got_a, got_b) = (a.join().unwrap(), b.join().unwrap());
    assert_in_order(&got_a, 2, count);
    assert_in_order(&got_b, 1, count);
}
