//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::sync::Arc;

use clasp_operators::operator::{InstanceContext, Runtime};
use clasp_operators::{Determinism, Emitter, Operator, OperatorInstance, Target, key};

/// What one request (or end of stream) emitted: `(target, key, payload)`.
pub type Emitted = Vec<(Target, Vec<u8>, Vec<u8>)>;

/// One instance of `op` with `successors` successors (operator ids 1..).
pub struct Harness<O: Operator> {
    pub rt: Runtime<O>,
    pub out: Emitter,
}

impl<O: Operator> Harness<O> {
    pub fn new(op: O, successors: u16, determinism: Determinism) -> Self {
        let ctx = InstanceContext {
            operator: 0,
            name: Arc::from("op"),
            successors: (1..=successors).collect(),
            determinism,
        };
        Harness {
            rt: Runtime::new(op, ctx),
            out: Emitter::new(),
        }
    }

    /// Processes one request; returns what it emitted, or the malformed reason.
    pub fn process(&mut self, key: &[u8], payload: &[u8]) -> Result<Emitted, &'static str> {
        self.out.clear();
        self.rt
            .process(key::key_hash(key), key, payload, &mut self.out)
            .map_err(|m| m.reason)?;
        Ok(self.drain())
    }

    pub fn end(&mut self) -> Emitted {
        self.out.clear();
        self.rt.end_of_stream(&mut self.out);
        self.drain()
    }

    fn drain(&self) -> Emitted {
        self.out
            .iter()
            .map(|e| (e.target, e.key.to_vec(), e.payload.to_vec()))
            .collect()
    }
}

pub fn u64_le(b: &[u8]) -> u64 {
    u64::from_le_bytes(b[..8].try_into().unwrap())
}
