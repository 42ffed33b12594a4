//! A run of requests to one operator, handed over in one call
//! ([`OperatorInstance::process_run`](super::OperatorInstance::process_run)).
//!
//! Why: an executor that calls an operator once per request pays, per request, for the call
//! through the instance's vtable, the runtime's set-up around `process` and its own
//! bookkeeping of the request's emissions. Where it has several requests to one operator in a
//! row (the words of a batch of sentences, queued for WC's `count`) it hands them over as a
//! run: the requests' keys and payloads lie back to back in one buffer, and a span per
//! request says where, next to the key's hash the state lookup starts from.

/// Where one request of a [`RequestRun`] lies in the run's buffer, and its key's hash
/// ([`crate::key::key_hash`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RequestSpan {
    /// The key's [`crate::key::key_hash`].
    pub key_hash: u64,
    /// The key is `bytes[key_from..payload_from]`.
    pub key_from: u32,
    /// The payload is `bytes[payload_from..payload_to]`.
    pub payload_from: u32,
    /// The end of the payload.
    pub payload_to: u32,
}

/// Requests to one operator, in the order they are to run.
#[derive(Clone, Copy, Debug)]
pub struct RequestRun<'a> {
    bytes: &'a [u8],
    spans: &'a [RequestSpan],
}

impl<'a> RequestRun<'a> {
    /// The requests `spans` describe, whose keys and payloads lie in `bytes`. Every span must
    /// lie inside `bytes` ([`RequestRun::get`] panics on one that does not).
    #[inline]
    pub fn new(bytes: &'a [u8], spans: &'a [RequestSpan]) -> Self {
        RequestRun { bytes, spans }
    }

    /// Requests in the run.
    #[inline]
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// Whether the run has no request.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// Request `index`: its key's hash, its key and its payload.
    #[inline]
    pub fn get(&self, index: usize) -> (u64, &'a [u8], &'a [u8]) {
        let s = &self.spans[index];
        let key = &self.bytes[s.key_from as usize..s.payload_from as usize];
        let payload = &self.bytes[s.payload_from as usize..s.payload_to as usize];
        (s.key_hash, key, payload)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_request_is_read_back_from_its_span() {
        let bytes = b"keyApayloadAkeyB";
        let spans = [
            RequestSpan {
                key_hash: 1,
                key_from: 0,
                payload_from: 4,
                payload_to: 12,
            },
            RequestSpan {
                key_hash: 2,
                key_from: 12,
                payload_from: 16,
                payload_to: 16,
            },
        ];
        let run = RequestRun::new(bytes, &spans);
        assert_eq!(run.len(), 2);
        assert_eq!(run.get(0), (1, &b"keyA"[..], &b"payloadA"[..]));
        assert_eq!(run.get(1), (2, &b"keyB"[..], &b""[..]));
        assert!(RequestRun::new(b"", &[]).is_empty());
    }
}
