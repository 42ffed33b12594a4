//! SYN — the synthetic pipeline: ten identical no-op stages in a line, used to
//! expose dispatch cost without execution cost or imbalance.

use crate::generate::{Generator, RecordRng, chacha_key};
use crate::key::encode_u64;
use crate::spec::AppDef;

/// Stages of the built-in SYN.
pub const STAGES: usize = 10;

/// A SYN of `stages` `forward` stages named `s1`…`sN`.
pub fn def(stages: usize) -> AppDef {
    let names: Vec<String> = (1..=stages).map(|i| format!("s{i}")).collect();
    let ops = names
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let next: Vec<&str> = names.get(i + 1).map(|s| s.as_str()).into_iter().collect();
            super::op(n, "forward", &next)
        })
        .collect();
    super::app(
        "syn",
        "synthetic pipeline of no-op stages (dispatch cost only)",
        ops,
    )
}

/// SYN input: key = record index (`u64` LE), payload = 16 hex digits of random data.
pub struct SynGenerator {
    key: [u8; 32],
}

impl SynGenerator {
    /// The generator for `seed`.
    pub fn new(seed: u64) -> Self {
        SynGenerator {
            key: chacha_key(seed, "syn"),
        }
    }
}

impl Generator for SynGenerator {
    fn record_into(&self, i: u64, key: &mut Vec<u8>, payload: &mut Vec<u8>) {
        key.clear();
        payload.clear();
        key.extend_from_slice(&encode_u64(i));
        let v = RecordRng::new(&self.key, i).next_u64();
        const HEX: &[u8; 16] = b"0123456789abcdef";
        for shift in (0..16).rev() {
            payload.push(HEX[((v >> (shift * 4)) & 0xf) as usize]);
        }
    }
}
