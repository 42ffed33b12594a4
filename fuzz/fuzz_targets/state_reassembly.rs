//! Feeds a peer's state parts, as arbitrary bytes describe them, to the reassembly of migrated
//! state (`clasp_dataplane::migrate::Reassembly`), then decodes what it reassembles: every step
//! must return an error or a value, never panic, and nothing reassembled may be longer than the
//! total its first part claimed.
#![no_main]

use clasp_dataplane::message::{self, StatePart};
use clasp_dataplane::migrate::Reassembly;
use libfuzzer_sys::fuzz_target;

/// Bytes that describe one part: total (4), offset (4), length (1).
const PART_HEAD_BYTES: usize = 9;

fuzz_target!(|data: &[u8]| {
    let mut r = Reassembly::default();
    let mut rest = data;
    while rest.len() >= PART_HEAD_BYTES {
        let total = u32::from_le_bytes(rest[0..4].try_into().unwrap());
        let offset = u32::from_le_bytes(rest[4..8].try_into().unwrap());
        let len = (rest[8] as usize).min(rest.len() - PART_HEAD_BYTES);
        let bytes = rest[PART_HEAD_BYTES..PART_HEAD_BYTES + len].to_vec();
        rest = &rest[PART_HEAD_BYTES + len..];
        if let Ok(Some(whole)) = r.add(StatePart {
            total,
            offset,
            bytes,
        }) {
            assert_eq!(whole.len(), total as usize);
            let _ = message::decode(&whole);
        }
    }
});
