//! Feeds arbitrary bytes to the network frame decoder: it must return an error or a frame,
//! never panic, whatever the bytes (and everything it accepts must re-validate).
#![no_main]

use clasp_dataplane::request::Request;
use clasp_dataplane::transport::wire::{self, Entries, Kind, NET_HEADER_BYTES};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(h) = wire::decode_frame(data, wire::FRAME_BYTES_MAX) {
        assert!(h.frame_bytes() <= data.len());
        if h.kind == Kind::Batch {
            for e in Entries::new(&data[NET_HEADER_BYTES..h.frame_bytes()], 0) {
                assert!(Request::parse(e).is_ok());
            }
        }
    }
    // Headers alone, at every limit the receiver may be configured with.
    let _ = wire::NetHeader::decode(data, 4096);
});
