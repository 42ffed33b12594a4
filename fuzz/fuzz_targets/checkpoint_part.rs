//! Feeds arbitrary bytes to the decoder of a checkpoint part (`checkpoint::Part::decode`): a
//! part is a file another process wrote, read back when a job restores; it must be an error or
//! a part, never a panic, and a part it accepts must encode back to bytes that decode to it.
#![no_main]

use clasp_dataplane::checkpoint::Part;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = Part::decode(data) {
        assert_eq!(Part::decode(&p.encode()), Ok(p));
    }
});
