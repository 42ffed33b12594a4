//! The request frame: one encoding from emission to execution, on every hop.
//!
//! A request is written once, when it is emitted, as one frame: a fixed 48-byte header, the
//! routing key padded to 16 bytes, then the payload. The same bytes go into a local ring or
//! are appended to a network batch; routing reads the header only, and nothing is decoded and
//! re-encoded on the way. All integers are little-endian, so a frame means the
//! same on every host. The payload starts 16-byte aligned (frames start 16-aligned in rings and
//! batches, the header is 48 bytes and the key is padded), so it may hold an rkyv archive.
//!
//! ```text
//! offset  size  field
//!      0     2  operator      target operator index in the app spec
//!      2     2  key_group     key_hash % KEY_GROUPS
//!      4     2  key_len       bytes of canonical key (≤ MAX_KEY_BYTES)
//!      6     2  flags         FLAG_* bits (tracked, control, from a moved key group);
//!                             unknown bits are an error
//!      8     2  epoch         low 16 bits of the routing epoch the sender routed it under
//!     10     2  dest          executor slot the frame is addressed to
//!     12     2  root_home     worker that admitted the root (its latency ledger lives there)
//!     14     2  source        executor slot that sent it (`INGRESS_SLOT`: the ingress)
//!     16     8  key_hash      xxh3 of the key (clasp_operators::key::key_hash)
//!     24     8  request_id    deterministic id: a hash of root, parent and index, or for a
//!                             parent's last child its id XOR its siblings' (`ledger.rs`)
//!     32     8  root_id       id of the root request of its tree
//!     40     8  admitted_ns   root's admission time on root_home's clock
//!     48     …  key, zero-padded to a multiple of 16, then the payload
//! ```

/// Bytes of the fixed header.
pub const REQUEST_HEADER_BYTES: usize = 48;
/// Longest canonical key.
pub const MAX_KEY_BYTES: usize = clasp_operators::key::MAX_KEY_BYTES;
/// The request's tree is tracked for end-to-end latency (1-in-N sampling clears it).
pub const FLAG_TRACKED: u16 = 1;
/// The frame is a migration-protocol message (marker, state, seal), not a request: it travels
/// on the same FIFO path as the requests it must stay ordered with.
pub const FLAG_CONTROL: u16 = 2;
/// Emitted by an execution of a key group its executor received in the frame's epoch (the
/// migration protocol's `Req::from_moved`): only such a request waits at a kept key group's
/// upstream gate during a migration.
pub const FLAG_FROM_MOVED: u16 = 4;
/// Every flag this version knows.
pub const FLAGS_KNOWN: u16 = FLAG_TRACKED | FLAG_CONTROL | FLAG_FROM_MOVED;
/// The `source` of frames the ingress sends.
pub const INGRESS_SLOT: u16 = u16::MAX;

// Executor slots.
//
// Why slots: the migration protocol's participants are executors (each owns its key groups'
// state and runs single-threaded), numbered across the cluster as `worker index × executors
// per worker + executor`. A frame names its sender and its addressee by slot, so a receiving
// network thread delivers without a routing table (a forwarded old-epoch request goes to its
// new owner although the old table names another), and a receiving executor knows which FIFO
// connection a frame came on. Epochs travel as their low 16 bits: a migration starts only after
// every slot completed the previous one, so a frame is at most one epoch ahead of its receiver
// and a few behind (an old root still queued on its way in); serial arithmetic recovers it.

const _: () = assert!(REQUEST_HEADER_BYTES % 16 == 0);

/// The fixed header of a request frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct RequestHeader {
    /// Target operator index.
    pub operator: u16,
    /// Key group of the key, in `0..KEY_GROUPS`.
    pub key_group: u16,
    /// `FLAG_*` bits.
    pub flags: u16,
    /// Routing epoch (low 16 bits).
    pub epoch: u16,
    /// Executor slot addressed.
    pub dest: u16,
    /// Worker holding the root's latency ledger.
    pub root_home: u16,
    /// Executor slot that sent the frame ([`INGRESS_SLOT`] for roots).
    pub source: u16,
    /// xxh3 of the canonical key.
    pub key_hash: u64,
    /// This request's id.
    pub request_id: u64,
    /// Its root's id.
    pub root_id: u64,
    /// Admission time of the root, ns on `root_home`'s clock.
    pub admitted_ns: u64,
}

/// A frame that is not a well-formed request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// Shorter than the header.
    #[error("request frame of {0} bytes is shorter than its {REQUEST_HEADER_BYTES}-byte header")]
    Short(usize),
    /// The key length exceeds the limit or the frame.
    #[error("key of {key_len} bytes does not fit a {frame_len}-byte frame (limit {MAX_KEY_BYTES})")]
    KeyLength {
        /// Declared key length.
        key_len: usize,
        /// Frame length.
        frame_len: usize,
    },
    /// Flags this version does not know.
    #[error("unknown request flags {0:#06x}")]
    Flags(u16),
    /// The key group is out of range.
    #[error("key group {0} out of range")]
    KeyGroup(u16),
}

/// A request read in place from a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request<'a> {
    /// The header.
    pub header: RequestHeader,
    /// Canonical key bytes.
    pub key: &'a [u8],
    /// Payload bytes.
    pub payload: &'a [u8],
}

/// Bytes a request with this key and payload occupies.
#[inline]
pub const fn frame_len(key_len: usize, payload_len: usize) -> usize {
    REQUEST_HEADER_BYTES + key_len.next_multiple_of(16) + payload_len
}

impl RequestHeader {
    /// Writes the header, `key` and `payload` into `out`, which must be exactly
    /// [`frame_len`]`(key.len(), payload.len())` bytes (a reserved ring slot or batch space).
    #[inline]
    pub fn write(&self, key: &[u8], payload: &[u8], out: &mut [u8]) {
        debug_assert!(key.len() <= MAX_KEY_BYTES);
        debug_assert_eq!(out.len(), frame_len(key.len(), payload.len()));
        out[0..2].copy_from_slice(&self.operator.to_le_bytes());
        out[2..4].copy_from_slice(&self.key_group.to_le_bytes());
        out[4..6].copy_from_slice(&(key.len() as u16).to_le_bytes());
        out[6..8].copy_from_slice(&self.flags.to_le_bytes());
        out[8..10].copy_from_slice(&self.epoch.to_le_bytes());
        out[10..12].copy_from_slice(&self.dest.to_le_bytes());
        out[12..14].copy_from_slice(&self.root_home.to_le_bytes());
        out[14..16].copy_from_slice(&self.source.to_le_bytes());
        out[16..24].copy_from_slice(&self.key_hash.to_le_bytes());
        out[24..32].copy_from_slice(&self.request_id.to_le_bytes());
        out[32..40].copy_from_slice(&self.root_id.to_le_bytes());
        out[40..48].copy_from_slice(&self.admitted_ns.to_le_bytes());
        let key_end = REQUEST_HEADER_BYTES + key.len();
        let padded = REQUEST_HEADER_BYTES + key.len().next_multiple_of(16);
        // The key's last 16-byte line zeroed whole, then the key over it: one fixed-width
        // store instead of a `memset` call for the padding's few bytes.
        if key.len() % 16 != 0 {
            out[padded - 16..padded].fill(0);
        }
        out[REQUEST_HEADER_BYTES..key_end].copy_from_slice(key);
        // Many requests carry a key alone (WC's words): no copy call for nothing.
        if !payload.is_empty() {
            out[padded..].copy_from_slice(payload);
        }
    }

    /// Reads only the header (routing needs nothing else). Does not validate the key length.
    #[inline]
    pub fn peek(frame: &[u8]) -> Result<RequestHeader, FrameError> {
        let h: &[u8; REQUEST_HEADER_BYTES] = frame
            .get(..REQUEST_HEADER_BYTES)
            .and_then(|b| b.try_into().ok())
            .ok_or(FrameError::Short(frame.len()))?;
        let u16_at = |o: usize| u16::from_le_bytes([h[o], h[o + 1]]);
        let u64_at = |o: usize| u64::from_le_bytes(h[o..o + 8].try_into().unwrap());
        let header = RequestHeader {
            operator: u16_at(0),
            key_group: u16_at(2),
            flags: u16_at(6),
            epoch: u16_at(8),
            dest: u16_at(10),
            root_home: u16_at(12),
            source: u16_at(14),
            key_hash: u64_at(16),
            request_id: u64_at(24),
            root_id: u64_at(32),
            admitted_ns: u64_at(40),
        };
        if header.flags & !FLAGS_KNOWN != 0 {
            return Err(FrameError::Flags(header.flags));
        }
        if header.key_group >= clasp_operators::key::KEY_GROUPS {
            return Err(FrameError::KeyGroup(header.key_group));
        }
        Ok(header)
    }

    /// Readdresses an encoded frame in place (forwarding during a migration keeps its epoch).
    #[inline]
    pub fn set_route(frame: &mut [u8], source: u16, dest: u16) {
        frame[10..12].copy_from_slice(&dest.to_le_bytes());
        frame[14..16].copy_from_slice(&source.to_le_bytes());
    }
}

/// The 64-bit epoch nearest to `current` whose low 16 bits are `low` (RFC 1982 serial
/// arithmetic: frames are at most a few epochs from the receiver's).
#[inline]
pub fn widen_epoch(current: u64, low: u16) -> u64 {
    let diff = low.wrapping_sub(current as u16) as i16;
    current.wrapping_add(diff as i64 as u64)
}

impl<'a> Request<'a> {
    /// Parses and bounds-checks a frame. Never panics, whatever the bytes.
    #[inline]
    pub fn parse(frame: &'a [u8]) -> Result<Request<'a>, FrameError> {
        let header = RequestHeader::peek(frame)?;
        let key_len = u16::from_le_bytes([frame[4], frame[5]]) as usize;
        let padded = REQUEST_HEADER_BYTES + key_len.next_multiple_of(16);
        if key_len > MAX_KEY_BYTES || padded > frame.len() {
            return Err(FrameError::KeyLength {
                key_len,
                frame_len: frame.len(),
            });
        }
        Ok(Request {
            header,
            key: &frame[REQUEST_HEADER_BYTES..REQUEST_HEADER_BYTES + key_len],
            payload: &frame[padded..],
        })
    }
}

/// The deterministic id of the `index`-th child of `parent` in the tree of root `root`: the
/// same in every run, so two runs can be compared, and random-looking, so XOR ledgers work.
///
/// It is xxh3-64 (seed [`CHILD_ID_SEED`]) of the 20 bytes `root ‖ parent ‖ index`
/// (little-endian), computed on the three words directly: every tracked chained request pays
/// it, and hashing a 20-byte stack buffer made the hash's overlapping 8-byte reads wait for the
/// stores that had just written it (a store-forwarding stall). The test below holds it equal
/// to the library's hash of those bytes.
#[inline]
pub fn child_id(root: u64, parent: u64, index: u32) -> u64 {
    // xxh3's path for 17–32 bytes: two 16-byte mixes, of bytes 0..16 and of bytes 4..20.
    let lo = mix16(root, parent, XXH3_SECRET[0], XXH3_SECRET[1]);
    let tail_lo = (root >> 32) | (parent << 32);
    let tail_hi = (parent >> 32) | (u64::from(index) << 32);
    let hi = mix16(tail_lo, tail_hi, XXH3_SECRET[2], XXH3_SECRET[3]);
    let acc = 20u64
        .wrapping_mul(XXH_PRIME64_1)
        .wrapping_add(lo)
        .wrapping_add(hi);
    // Never 0: 0 marks "no request" in ledgers.
    xxh3_avalanche(acc).max(1)
}

/// The seed of [`child_id`]'s hash.
const CHILD_ID_SEED: u64 = 0x434C_4153_5049_4453;
/// xxh3's first prime.
const XXH_PRIME64_1: u64 = 0x9E37_79B1_85EB_CA87;
/// The first 32 bytes of xxh3's default secret, as little-endian words.
const XXH3_SECRET: [u64; 4] = [
    0xbe4b_a423_396c_feb8,
    0x1cad_21f7_2c81_017c,
    0xdb97_9083_e96d_d4de,
    0x1f67_b3b7_a4a4_4072,
];

/// xxh3's `mix16B` of the input words `a`, `b` against secret words `s0`, `s1`.
#[inline(always)]
fn mix16(a: u64, b: u64, s0: u64, s1: u64) -> u64 {
    let x = a ^ s0.wrapping_add(CHILD_ID_SEED);
    let y = b ^ s1.wrapping_sub(CHILD_ID_SEED);
    let product = u128::from(x) * u128::from(y);
    (product as u64) ^ ((product >> 64) as u64)
}

/// xxh3's final avalanche.
#[inline(always)]
fn xxh3_avalanche(mut h: u64) -> u64 {
    h ^= h >> 37;
    h = h.wrapping_mul(0x1656_6791_9E37_79F9);
    h ^ (h >> 32)
}

/// The id of root number `root_seq` (admission order at the ingress).
#[inline]
pub fn root_id(root_seq: u64) -> u64 {
    child_id(root_seq, 0, u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_request_round_trips_and_its_payload_is_aligned() {
        let h = RequestHeader {
            operator: 3,
            key_group: 1023,
            flags: FLAG_TRACKED,
            epoch: 7,
            dest: 9,
            root_home: 2,
            source: 4,
            key_hash: 0xDEAD_BEEF,
            request_id: 11,
            root_id: 12,
            admitted_ns: 13,
        };
        let (key, payload) = (b"hello", b"world!!");
        let mut buf = vec![0xAA; frame_len(key.len(), payload.len())];
        h.write(key, payload, &mut buf);
        let r = Request::parse(&buf).unwrap();
        assert_eq!(r.header, h);
        assert_eq!(r.key, key);
        assert_eq!(r.payload, payload);
        assert_eq!(
            (r.payload.as_ptr() as usize - buf.as_ptr() as usize) % 16,
            0
        );
        // The layout is pinned: a test vector.
        assert_eq!(&buf[..8], &[3, 0, 0xFF, 3, 5, 0, 1, 0]);
    }

    #[test]
    fn every_key_length_is_zero_padded_and_the_header_left_alone() {
        let h = RequestHeader {
            operator: 1,
            key_hash: u64::MAX,
            admitted_ns: u64::MAX,
            ..RequestHeader::default()
        };
        for key_len in 0..=33 {
            let key: Vec<u8> = (1..=key_len as u8).collect();
            for payload in [&b""[..], b"p", &[0xEE; 17]] {
                let mut buf = vec![0xAA; frame_len(key.len(), payload.len())];
                h.write(&key, payload, &mut buf);
                let r = Request::parse(&buf).unwrap();
                assert_eq!((r.header, r.key, r.payload), (h, &key[..], payload));
                let padding = &buf[REQUEST_HEADER_BYTES + key_len..buf.len() - payload.len()];
                assert!(padding.iter().all(|&b| b == 0), "key of {key_len} bytes");
            }
        }
    }

    #[test]
    fn malformed_frames_are_named() {
        assert_eq!(Request::parse(&[0; 10]), Err(FrameError::Short(10)));
        let mut f = vec![0u8; 64];
        f[6] = 0x80;
        assert_eq!(Request::parse(&f), Err(FrameError::Flags(0x80)));
        assert_eq!(widen_epoch(70_000, 70_001u64 as u16), 70_001);
        assert_eq!(widen_epoch(70_000, 69_999u64 as u16), 69_999);
        assert_eq!(widen_epoch(65_536, 65_535u64 as u16), 65_535);
        assert_eq!(widen_epoch(3, 3), 3);
        f[6] = 0;
        f[2..4].copy_from_slice(&5000u16.to_le_bytes());
        assert_eq!(Request::parse(&f), Err(FrameError::KeyGroup(5000)));
        f[2..4].fill(0);
        f[4..6].copy_from_slice(&40u16.to_le_bytes());
        assert!(matches!(
            Request::parse(&f),
            Err(FrameError::KeyLength { .. })
        ));
    }

    #[test]
    fn ids_are_deterministic_and_distinct() {
        assert_eq!(child_id(1, 2, 3), child_id(1, 2, 3));
        assert_ne!(child_id(1, 2, 3), child_id(1, 2, 4));
        assert_ne!(root_id(1), root_id(2));
    }

    proptest! {
        #[test]
        fn child_ids_are_xxh3_of_root_parent_index(root: u64, parent: u64, index: u32) {
            let mut buf = [0u8; 20];
            buf[..8].copy_from_slice(&root.to_le_bytes());
            buf[8..16].copy_from_slice(&parent.to_le_bytes());
            buf[16..].copy_from_slice(&index.to_le_bytes());
            let want = xxhash_rust::xxh3::xxh3_64_with_seed(&buf, CHILD_ID_SEED).max(1);
            prop_assert_eq!(child_id(root, parent, index), want);
        }

        #[test]
        fn random_bytes_never_panic_the_parser(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(r) = Request::parse(&bytes) {
                prop_assert!(r.key.len() <= MAX_KEY_BYTES);
                prop_assert!(REQUEST_HEADER_BYTES + r.key.len() + r.payload.len() <= bytes.len());
            }
        }
    }
}
