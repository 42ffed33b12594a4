//! Imports a peer's key group archive, as arbitrary bytes, into WC's count — whole, as a copy
//! staged ahead of a move, as a refresh of that copy, and as changes over it
//! (`OperatorInstance::import_group`, `stage_group`): every call must return an error or a key
//! count, never panic.
#![no_main]

use clasp_operators::OperatorInstance;
use clasp_operators::apps;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&kg, bytes)) = data.split_first() else {
        return;
    };
    let spec = apps::builtin("wc").expect("a built-in app");
    let count = spec.operators.len() - 1;
    let kg = u16::from(kg);
    let mut whole: Box<dyn OperatorInstance> = spec.instantiate(count);
    let _ = whole.import_group(kg, bytes);
    // The same bytes as a copy ahead, again as a refresh of it, then as its changes.
    let mut ahead = spec.instantiate(count);
    if ahead.stage_group(kg, bytes).is_ok() {
        let _ = ahead.stage_group(kg, bytes);
        let _ = ahead.import_group(kg, bytes);
    }
});
