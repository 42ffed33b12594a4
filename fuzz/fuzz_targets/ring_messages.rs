//! Feeds arbitrary bytes to the decoders of a worker segment's `control` and `report` rings
//! (`Command` and `Report`): each must return an error or a value, never panic, and a value it
//! accepts must encode back to the same bytes (a report's error text, read lossily as UTF-8, to
//! bytes that decode to the same report).
#![no_main]

use clasp_dataplane::runtime::messages::{Command, Report};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(c) = Command::decode(data) {
        assert_eq!(&c.encode()[..], data);
    }
    if let Ok(r) = Report::decode(data) {
        let again = r.encode();
        assert_eq!(Report::decode(&again).as_ref(), Ok(&r));
        if let Report::Deltas(batch) = r {
            assert_eq!(batch.iter().count() * 24, batch.as_bytes().len());
        }
    }
});
