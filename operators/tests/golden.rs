//! Golden digests: generator output and oracle results are pinned, so a change in any draw,
//! any operator or any digest shows up here. If a change is intended, rerun with
//! `GOLDEN_PRINT=1 cargo test -p clasp-operators --test golden -- --nocapture` and paste.

use clasp_operators::digest::Digest;
use clasp_operators::{apps, generate, oracle};

const RECORDS: u64 = 2000;

fn generator_digest(app: &str, seed: u64) -> Digest {
    let g = generate::generator(app, seed).unwrap();
    let mut d = Digest::EMPTY;
    let mut scratch = Vec::new();
    for i in 0..RECORDS {
        let (k, p) = g.record(i);
        d.add_keyed(i, &k, &p, &mut scratch);
    }
    d
}

/// `(app, generator digest, oracle state digest, oracle output digest)` for seed 1.
const GOLDEN: [(&str, &str, &str, &str); 7] = [
    (
        "wc",
        "b99a2e15e9fd73d3067fc4181d910cf700000000000007d0",
        "6201e8ec7e988bffbd392644cccadfaa00000000000018f4",
        "6e788b7ee73d921c7591c4165e078c490000000000004e20",
    ),
    (
        "sd",
        "00ba400704152f37da1247a14778f0ab00000000000007d0",
        "094553fc6cdc58840e75957c038f81e90000000000000036",
        "c455945d0f6e24ef49445439688e34ad0000000000000004",
    ),
    (
        "aa",
        "7bcecaf23aad373b88dd25093d6ac10400000000000007d0",
        "1594c74e9d6f81fef67c8c709a59ebf800000000000003a9",
        "4020209625697feecb52b866642b0bc900000000000000c8",
    ),
    (
        "pl",
        "2caec4b49161d2d6b1602299ae924f8500000000000007d0",
        "6ec3cc89ee083b17ba4ddaa063247e3b0000000000000005",
        "000000000000000000000000000000000000000000000000",
    ),
    (
        "nwm",
        "5e8da61a5f0fca90f4ef2bc2839a10d700000000000007d0",
        "fad927038403100a8a479eabc8122f75000000000000011c",
        "000000000000000000000000000000000000000000000000",
    ),
    (
        "etl",
        "76d1c6074b0a10b948e08f34fe9673f200000000000007d0",
        "3582d42ec87c911d7784e49c4d246e4b0000000000000079",
        "181602a07f14f8fcc0d4d1138868ab0300000000000009fe",
    ),
    (
        "syn",
        "c990f76911cd573aad4cdf627696961d00000000000007d0",
        "000000000000000000000000000000000000000000000000",
        "89f84b66530223d629865b57e9fa6e0300000000000007d0",
    ),
];

#[test]
fn golden_digests() {
    let print = std::env::var_os("GOLDEN_PRINT").is_some();
    for (app, gen_hex, state_hex, out_hex) in GOLDEN {
        let spec = apps::builtin(app).unwrap();
        let report = oracle::run(&spec, RECORDS, 1);
        let got = (
            generator_digest(app, 1).to_hex(),
            report.state_digest().to_hex(),
            report.output_digest().to_hex(),
        );
        if print {
            println!(
                "    (\"{app}\", \"{}\", \"{}\", \"{}\"),",
                got.0, got.1, got.2
            );
            continue;
        }
        assert_eq!(
            (got.0.as_str(), got.1.as_str(), got.2.as_str()),
            (gen_hex, state_hex, out_hex),
            "{app}"
        );
    }
}

#[test]
fn same_seed_same_digests_other_seed_different() {
    for app in apps::builtin_names() {
        let spec = apps::builtin(app).unwrap();
        let a = oracle::run(&spec, 300, 1);
        let b = oracle::run(&spec, 300, 1);
        let c = oracle::run(&spec, 300, 2);
        assert_eq!(a.comparable, b.comparable, "{app}");
        assert_ne!(
            (a.state_digest(), a.output_digest()),
            (c.state_digest(), c.output_digest()),
            "{app}: another seed gives other digests"
        );
        assert_ne!(generator_digest(app, 1), generator_digest(app, 2));
    }
}

#[test]
fn random_access_and_producer_split() {
    for app in apps::builtin_names() {
        let g = generate::generator(app, 9).unwrap();
        let late = g.record(1_000_000);
        assert_eq!(
            generate::generator(app, 9).unwrap().record(1_000_000),
            late,
            "{app}"
        );
        // Three producers: every record exactly once, each key through one producer.
        let all: Vec<u64> = (0..3)
            .flat_map(|p| {
                generate::producer_records(g.as_ref(), 0..200, p, 3)
                    .map(|(i, _, _)| i)
                    .collect::<Vec<_>>()
            })
            .collect();
        let mut sorted = all.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..200).collect::<Vec<_>>(), "{app}");
        for i in 0..200 {
            let (k, _) = g.record(i);
            assert_eq!(
                generate::producer_of(&k, 3),
                generate::producer_of(&g.record(i).0, 3)
            );
        }
    }
}

#[test]
fn generator_statistics() {
    // WC: the vocabulary reaches ~40 000 distinct words (26 000 after 200 000 words already).
    let g = generate::generator("wc", 1).unwrap();
    let mut words = std::collections::HashSet::new();
    for i in 0..20_000 {
        for w in g.record(i).1.split(|&b| b == b' ') {
            words.insert(w.to_vec());
        }
    }
    assert!((24_000..29_000).contains(&words.len()), "{}", words.len());
    // AA: ~90 % views.
    let g = generate::generator("aa", 1).unwrap();
    let views = (0..5000)
        .filter(|&i| {
            g.record(i)
                .1
                .windows(13)
                .any(|w| w == b"\"type\":\"view\"" || w == b"_type\":\"view\"")
        })
        .count();
    assert!((4350..4650).contains(&views), "{views}");
    // SD: 54 sensors.
    let g = generate::generator("sd", 1).unwrap();
    let sensors: std::collections::HashSet<Vec<u8>> = (0..1000).map(|i| g.record(i).0).collect();
    assert_eq!(sensors.len(), 54);
    // NWM: ~30 hosts, ~90 % failures.
    let g = generate::generator("nwm", 1).unwrap();
    let fails = (0..5000)
        .filter(|&i| g.record(i).1.windows(13).any(|w| w == b"status\":\"fail"))
        .count();
    assert!((4350..4650).contains(&fails), "{fails}");
}
