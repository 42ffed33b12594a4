//! Feeds arbitrary bytes to the message decoder: it must return an error or a message, never
//! panic, whatever the bytes; a message it accepts must encode and decode to itself, and its
//! checked conversions (plans, key groups) must return, not panic.
#![no_main]

use clasp_dataplane::message::{self, Message};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(m) = message::decode(data) else {
        return;
    };
    let again = message::encode(&m).expect("a decoded message encodes");
    assert_eq!(message::decode(&again).expect("and decodes again"), m);
    match &m {
        Message::Plans(p) => {
            let _ = p.assignments();
        }
        Message::Seal(s) => {
            let _ = message::migration::key_groups_of(&s.key_groups);
        }
        _ => {}
    }
});
