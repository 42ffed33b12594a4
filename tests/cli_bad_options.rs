//! Options and files refused naming what is wrong, before anything runs: transport sizes in
//! the options' terms, negative numbers given apart from their option, a driver address the
//! workers of a cluster file cannot reach (unspecified, or loopback for workers elsewhere),
//! and input files without end (`/dev/zero`).

mod common;

use common::{assert_no_panic, assert_refused_naming_the_last_option, clasp, stderr};

/// Transport sizes are refused in the options' terms, not the transport's fields.
#[test]
fn transport_sizes_are_refused_naming_the_option() {
    let run = ["run", "--static", "--workers", "1", "--app", "wc"];
    for bad in [["--batch-bytes", "50"], ["--data-credit-bytes", "0"]] {
        let args = [&run[..], &bad[..]].concat();
        assert_refused_naming_the_last_option(&args);
        assert!(!stderr(&clasp(&args)).contains("_bytes"), "{args:?}");
    }
}

/// A negative number given apart from its option (`--duration -1`) is the option's value,
/// refused naming the option, not taken for an unknown argument.
#[test]
fn negative_values_are_refused_naming_their_option() {
    for args in [
        &["run", "--duration", "-1"][..],
        &["gen", "--app", "wc", "--records", "-5"],
        &["run", "--static", "--workers", "1", "--seed", "-1"],
        &["local", "--app", "wc", "--records", "10", "--rate", "-3"],
    ] {
        assert_refused_naming_the_last_option(args);
        assert!(
            !stderr(&clasp(args)).contains("unexpected argument"),
            "{args:?}"
        );
    }
}

/// The workers of a cluster file connect back to the driver: an unspecified address
/// (`0.0.0.0`) advertised to them, given or implied by --driver-listen, is refused.
#[test]
fn an_unreachable_driver_address_is_refused_for_a_cluster_file() {
    let run = ["run", "--static", "--cluster", "/dev/null", "--app", "wc"];
    for bad in [
        &["--driver-listen", "0.0.0.0:27100"][..],
        &[
            "--driver-listen",
            "0.0.0.0:27100",
            "--driver-advertise",
            "0.0.0.0:27100",
        ],
        &["--driver-listen", "[::]:27100"],
    ] {
        assert_refused_naming_the_last_option(&[&run[..], bad].concat());
    }
}

/// A driver that advertises a loopback address (the default --driver-listen, 127.0.0.1) to a
/// cluster file's worker on another host is refused naming the option that set it, before
/// anything else is said: the worker would dial itself and the run wait out its timeout.
#[test]
fn a_loopback_driver_address_is_refused_for_workers_on_other_hosts() {
    let cluster = common::ClusterDir::new("loopback-driver", 7, 1);
    // 203.0.113.0/24 is reserved for documentation: not this host, never dialed (refused).
    let text = "cluster_id = 7\n[[worker]]\nid = 1\naddress = \"203.0.113.9:7001\"\n";
    std::fs::write(&cluster.file, text).unwrap();
    let secret = cluster.dir.join("secret");
    std::fs::write(&secret, "a cluster secret of at least 32 bytes").unwrap();
    let run = [
        "run",
        "--static",
        "--app",
        "wc",
        "--secret-file",
        secret.to_str().unwrap(),
        "--cluster",
        cluster.path(),
    ];
    for (extra, option) in [
        (&[][..], "--driver-listen 127.0.0.1:0"),
        (
            &[
                "--driver-listen",
                "0.0.0.0:0",
                "--driver-advertise",
                "127.0.0.1:7100",
            ],
            "--driver-advertise 127.0.0.1:7100",
        ),
    ] {
        let out = clasp(&[&run[..], extra].concat());
        assert_no_panic(&out, option);
        assert_eq!(out.status.code(), Some(2), "{option}: {}", stderr(&out));
        let said = stderr(&out);
        assert!(
            said.starts_with(&format!("clasp: error: {option}")),
            "{said}"
        );
        assert!(
            said.contains("worker 1") && said.contains("203.0.113.9:7001"),
            "{said}"
        );
    }
}

/// A cluster file's worker told to listen on port 0 is refused: the others dial the file's
/// port, and would never reach one the system picks (the worker waited out its job timeout).
#[test]
fn a_cluster_file_worker_on_a_port_the_system_picks_is_refused() {
    let cluster = common::ClusterDir::new("listen-port-0", 7, 1);
    let text = "cluster_id = 7\n[[worker]]\nid = 1\naddress = \"127.0.0.1:7001\"\n";
    std::fs::write(&cluster.file, text).unwrap();
    #[rustfmt::skip]
    let worker = ["worker", "--id", "1", "--cluster", cluster.path(),
        "--listen", "127.0.0.1:0"];
    let out = clasp(&worker);
    assert_no_panic(&out, "--listen 127.0.0.1:0");
    let said = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(
        said.contains("--listen 127.0.0.1:0") && said.contains("port 7001"),
        "{said}"
    );
}

/// A file given for a cluster, a secret, an app or a run's settings that is not one of those
/// (`/dev/zero`, a data file) is refused naming its size limit, not read until the memory runs
/// out.
#[test]
fn endless_input_files_are_refused_at_their_size_limit() {
    let cluster = common::ClusterDir::new("endless", 7, 1);
    for args in [
        &["run", "--static", "--cluster", "/dev/zero", "--app", "wc"][..],
        &["oracle", "--app-file", "/dev/zero", "--records", "10"],
        &["run", "--config", "/dev/zero", "--app", "wc"],
        &[
            "worker",
            "--id",
            "1",
            "--cluster",
            cluster.path(),
            "--secret-file",
            "/dev/zero",
        ],
    ] {
        let out = clasp(args);
        assert_no_panic(&out, &format!("{args:?}"));
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("larger than") || stderr(&out).contains("a secret may hold"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
}

/// Workers this run would start whose shared memory together is more than the machine has
/// available are refused naming the options: each reserves its segment when its job starts,
/// and 64 workers of 64 executors took all 24 GiB here until the kernel's out-of-memory killer
/// ended them, with no error.
#[test]
fn workers_whose_shared_memory_the_machine_cannot_hold_are_refused() {
    // 64 workers × 4 288 rings of 8 MiB: 2.1 TiB.
    let tib = 1u64 << 40;
    // Without a figure to check against, the run would start them.
    match clasp_shmring::available_memory_bytes() {
        Some(b) if b <= 2 * tib => {}
        other => {
            eprintln!("skipped: {other:?} bytes of memory available, not under 2 TiB");
            return;
        }
    }
    let args = [
        "run",
        "--static",
        "--app",
        "wc",
        "--executors",
        "64",
        "--ring-bytes",
        "8388608",
        "--workers",
        "64",
    ];
    assert_refused_naming_the_last_option(&args);
    assert!(stderr(&clasp(&args)).contains("GiB this machine has available"));
}
