//! Options and files refused naming what is wrong, before anything runs: transport sizes in
//! the options' terms, negative numbers given apart from their option, a driver address the
//! workers of a cluster file cannot reach, and input files without end (`/dev/zero`).

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
