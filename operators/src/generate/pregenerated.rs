//! Records generated once, before a timed run, and replayed from memory.
//!
//! A benchmark that compares two systems on the same input must not time the generator (a
//! ChaCha stream and ten Zipf draws per WC sentence cost about as much as counting the words):
//! both read the same records, made beforehand. [`Pregenerated`] is that input for the ingress:
//! a [`Generator`] whose first `len` records are copies out of one buffer and whose later ones
//! are computed by the generator they were made with, so record `i` is the same bytes either way.

use super::Generator;

/// The first [`Pregenerated::len`] records of a generator, kept in two flat buffers.
pub struct Pregenerated {
    /// The generator the records came from (records past the kept ones).
    source: Box<dyn Generator>,
    keys: Vec<u8>,
    payloads: Vec<u8>,
    /// `ends[i]` = (end of key `i` in `keys`, end of payload `i` in `payloads`).
    ends: Vec<(usize, usize)>,
}

impl Pregenerated {
    /// Records `0..records` of `source`, generated now.
    pub fn new(source: Box<dyn Generator>, records: u64) -> Self {
        let (mut keys, mut payloads) = (Vec::new(), Vec::new());
        let mut ends = Vec::with_capacity(usize::try_from(records).unwrap_or(0));
        let (mut key, mut payload) = (Vec::new(), Vec::new());
        for i in 0..records {
            source.record_into(i, &mut key, &mut payload);
            keys.extend_from_slice(&key);
            payloads.extend_from_slice(&payload);
            ends.push((keys.len(), payloads.len()));
        }
        Pregenerated {
            source,
            keys,
            payloads,
            ends,
        }
    }

    /// Records kept in memory.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether no record is kept.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Kept record `i`'s key and payload (`None` past the kept ones).
    pub fn get(&self, i: usize) -> Option<(&[u8], &[u8])> {
        let (key_end, payload_end) = *self.ends.get(i)?;
        let (key_start, payload_start) = match i.checked_sub(1) {
            Some(prev) => self.ends[prev],
            None => (0, 0),
        };
        Some((
            &self.keys[key_start..key_end],
            &self.payloads[payload_start..payload_end],
        ))
    }
}

impl Generator for Pregenerated {
    fn record_into(&self, i: u64, key: &mut Vec<u8>, payload: &mut Vec<u8>) {
        match usize::try_from(i).ok().and_then(|i| self.get(i)) {
            Some((k, p)) => {
                key.clear();
                key.extend_from_slice(k);
                payload.clear();
                payload.extend_from_slice(p);
            }
            None => self.source.record_into(i, key, payload),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replays_the_generators_records_and_computes_the_rest() {
        let made = || super::super::generator("wc", 7).unwrap();
        let kept = Pregenerated::new(made(), 50);
        assert_eq!(kept.len(), 50);
        for i in [0, 1, 49, 50, 51, 1000] {
            assert_eq!(kept.record(i), made().record(i), "record {i}");
        }
        assert!(kept.get(50).is_none());
    }
}
