//! Kinds shared by several apps: `forward` (SYN's no-op stage) and `sink`.

use crate::emitter::Out;
use crate::operator::{Malformed, Operator};
use crate::spec::{KindInfo, Registry};

/// Forwards every request unchanged (key and payload) to all successors, or to the app's output
/// if it has none (so the last stage of a SYN has an output to compare). SYN's stage: it exposes dispatch cost with no execution cost.
pub struct Forward;

impl Operator for Forward {
    type State = ();
    #[inline]
    fn process(
        &mut self,
        key: &[u8],
        payload: &[u8],
        _: &mut (),
        out: &mut Out<'_>,
    ) -> Result<(), Malformed> {
        if out.successors() == 0 {
            out.output(key, payload);
        } else {
            out.emit(key, payload);
        }
        Ok(())
    }
}

/// Turns every request into a sink output (key and payload unchanged).
pub struct Sink;

impl Operator for Sink {
    type State = ();
    #[inline]
    fn process(
        &mut self,
        key: &[u8],
        payload: &[u8],
        _: &mut (),
        out: &mut Out<'_>,
    ) -> Result<(), Malformed> {
        out.output(key, payload);
        Ok(())
    }
}

pub(crate) fn register(r: &mut Registry) {
    r.register(
        "forward",
        KindInfo::stateless(
            "no-op: forwards each request to every successor (or to the output)",
            "its input's key",
        ),
        |_| Ok(Forward),
    );
    r.register(
        "sink",
        KindInfo::stateless("emits each request as an output", "its input's key"),
        |_| Ok(Sink),
    );
}
