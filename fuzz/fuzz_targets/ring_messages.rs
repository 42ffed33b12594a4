//! Feeds arbitrary bytes to the decoders of a worker segment's `control` and `report` rings
//! (`Command` and `Report`): each must return an error or a value, never panic, and a value it
//! accepts must encode back to the same bytes.
#![no_main]

use clasp_dataplane::runtime::messages::{Command, Report};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(c) = Command::decode(data) {
        assert_eq!(&c.encode()[..], data);
    }
    if let Ok(r) = Report::decode(data) {
        assert_eq!(r.encode(), data);
        if let Report::Deltas(batch) = r {
            assert_eq!(batch.iter().count() * 24, batch.as_bytes().len());
        }
    }
});
