//! Two small, explicit byte formats.
//!
//! * [`StateCodec`]: the canonical encoding of a state value. It is what a state digest hashes
//!   and what an exported key group carries inside its rkyv archive, so "the digest matches"
//!   and "the bytes that migrated decode to the same value" are one property. It is written by
//!   hand (little-endian integers, `f64` by its bits, `u32` length prefixes) rather than derived
//!   from rkyv's layout so that golden digests survive an rkyv upgrade. A user's own state type
//!   gets it with `#[derive(StateCodec)]`: its fields' encodings in declaration order (an enum
//!   first writes its variant index as one byte), the same bytes a hand-written impl would
//!   give. Collections with a canonical order are covered (`Vec`, `VecDeque`, `BTreeMap`,
//!   `BTreeSet`, arrays); hash maps are not, since two equal maps may iterate differently and
//!   a state's bytes must be a function of its value.
//! * [`Writer`] helpers and [`Reader`]: the binary payloads operators pass each other. A
//!   [`Reader`] never panics on short or garbled input: it returns [`Malformed`], which the
//!   runtime counts and drops.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::operator::Malformed;

/// `#[derive(StateCodec)]`: the trait's canonical encoding, field by field (see the module
/// docs).
///
/// ```
/// use clasp_operators::StateCodec;
///
/// #[derive(StateCodec, Default, PartialEq, Debug)]
/// struct Session {
///     started_ms: u64,
///     pages: Vec<String>,
///     last: Option<(u64, bool)>,
/// }
///
/// let s = Session { started_ms: 5, pages: vec!["a".into()], last: Some((9, true)) };
/// let mut bytes = Vec::new();
/// s.encode(&mut bytes);
/// assert_eq!(Session::decode(&mut &bytes[..]).unwrap(), s);
/// ```
pub use clasp_operators_derive::StateCodec;

/// Why a state value or an archive could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot decode state: {0}")]
pub struct DecodeError(pub &'static str);

/// The canonical byte encoding of a state value (see the module docs).
pub trait StateCodec: Sized {
    /// Appends the encoding of `self` to `out`.
    fn encode(&self, out: &mut Vec<u8>);
    /// Decodes a value from the front of `input`, advancing it.
    fn decode(input: &mut &[u8]) -> Result<Self, DecodeError>;
}

fn take<'a>(input: &mut &'a [u8], n: usize) -> Result<&'a [u8], DecodeError> {
    if input.len() < n {
        return Err(DecodeError("truncated"));
    }
    let (head, rest) = input.split_at(n);
    *input = rest;
    Ok(head)
}

macro_rules! int_codec {
    ($($t:ty),*) => {$(
        impl StateCodec for $t {
            #[inline]
            fn encode(&self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
            #[inline]
            fn decode(input: &mut &[u8]) -> Result<Self, DecodeError> {
                let bytes = take(input, size_of::<$t>())?;
                Ok(<$t>::from_le_bytes(bytes.try_into().expect("length checked")))
            }
        }
    )*};
}
int_codec!(u8, u16, u32, u64, u128, i8, i16, i32, i64, i128);

/// As a `u64`, so the bytes are the same on every platform.
impl StateCodec for usize {
    fn encode(&self, out: &mut Vec<u8>) {
        (*self as u64).encode(out);
    }
    fn decode(input: &mut &[u8]) -> Result<Self, DecodeError> {
        usize::try_from(u64::decode(input)?).map_err(|_| DecodeError("usize out of range"))
    }
}

impl StateCodec for () {
    fn encode(&self, _out: &mut Vec<u8>) {}
    fn decode(_input: &mut &[u8]) -> Result<Self, DecodeError> {
        Ok(())
    }
}

impl StateCodec for bool {
    fn encode(&self, out: &mut Vec<u8>) {
        out.push(u8::from(*self));
    }
    fn decode(input: &mut &[u8]) -> Result<Self, DecodeError> {
        match take(input, 1)?[0] {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(DecodeError("bad bool")),
        }
    }
}

impl StateCodec for f64 {
    fn encode(&self, out: &mut Vec<u8>) {
        self.to_bits().encode(out);
    }
    fn decode(input: &mut &[u8]) -> Result<Self, DecodeError> {
        Ok(f64::from_bits(u64::decode(input)?))
    }
}

impl StateCodec for f32 {
    fn encode(&self, out: &mut Vec<u8>) {
        self.to_bits().encode(out);
    }
    fn decode(input: &mut &[u8]) -> Result<Self, DecodeError> {
        Ok(f32::from_bits(u32::decode(input)?))
    }
}

fn encode_len(len: usize, out: &mut Vec<u8>) {
    u32::try_from(len)
        .expect("state collections hold fewer than 2^32 items")
        .encode(out);
}

fn decode_len(input: &mut &[u8]) -> Result<usize, DecodeError> {
    let len = u32::decode(input)? as usize;
    // Every element takes at least one byte... except zero-sized ones, which no state uses in a
    // collection; bound the length by the bytes left so a garbled length cannot make us reserve
    // gigabytes.
    if len > input.len() {
        return Err(DecodeError("length exceeds input"));
    }
    Ok(len)
}

impl StateCodec for String {
    fn encode(&self, out: &mut Vec<u8>) {
        encode_len(self.len(), out);
        out.extend_from_slice(self.as_bytes());
    }
    fn decode(input: &mut &[u8]) -> Result<Self, DecodeError> {
        let len = decode_len(input)?;
        let bytes = take(input, len)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| DecodeError("bad utf-8"))
    }
}

impl<T: StateCodec> StateCodec for Vec<T> {
    fn encode(&self, out: &mut Vec<u8>) {
        encode_len(self.len(), out);
        for x in self {
            x.encode(out);
        }
    }
    fn decode(input: &mut &[u8]) -> Result<Self, DecodeError> {
        let len = decode_len(input)?;
        let mut v = Vec::with_capacity(len);
        for _ in 0..len {
            v.push(T::decode(input)?);
        }
        Ok(v)
    }
}

impl<T: StateCodec> StateCodec for VecDeque<T> {
    fn encode(&self, out: &mut Vec<u8>) {
        encode_len(self.len(), out);
        for x in self {
            x.encode(out);
        }
    }
    fn decode(input: &mut &[u8]) -> Result<Self, DecodeError> {
        Ok(Vec::<T>::decode(input)?.into())
    }
}

impl<T: StateCodec> StateCodec for Option<T> {
    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            None => out.push(0),
            Some(x) => {
                out.push(1);
                x.encode(out);
            }
        }
    }
    fn decode(input: &mut &[u8]) -> Result<Self, DecodeError> {
        match take(input, 1)?[0] {
            0 => Ok(None),
            1 => Ok(Some(T::decode(input)?)),
            _ => Err(DecodeError("bad option tag")),
        }
    }
}

impl<K: StateCodec + Ord, V: StateCodec> StateCodec for BTreeMap<K, V> {
    fn encode(&self, out: &mut Vec<u8>) {
        encode_len(self.len(), out);
        for (k, v) in self {
            k.encode(out);
            v.encode(out);
        }
    }
    fn decode(input: &mut &[u8]) -> Result<Self, DecodeError> {
        let len = decode_len(input)?;
        let mut map = BTreeMap::new();
        for _ in 0..len {
            let k = K::decode(input)?;
            // Keys ascending and unique, as `encode` writes them: one value, one encoding.
            if map.last_key_value().is_some_and(|(last, _)| *last >= k) {
                return Err(DecodeError("map keys out of order"));
            }
            map.insert(k, V::decode(input)?);
        }
        Ok(map)
    }
}

impl<T: StateCodec + Ord> StateCodec for BTreeSet<T> {
    fn encode(&self, out: &mut Vec<u8>) {
        encode_len(self.len(), out);
        for x in self {
            x.encode(out);
        }
    }
    fn decode(input: &mut &[u8]) -> Result<Self, DecodeError> {
        let len = decode_len(input)?;
        let mut set = BTreeSet::new();
        for _ in 0..len {
            let x = T::decode(input)?;
            if set.last().is_some_and(|last| *last >= x) {
                return Err(DecodeError("set items out of order"));
            }
            set.insert(x);
        }
        Ok(set)
    }
}

/// Fixed length: no length prefix.
impl<T: StateCodec, const N: usize> StateCodec for [T; N] {
    fn encode(&self, out: &mut Vec<u8>) {
        for x in self {
            x.encode(out);
        }
    }
    fn decode(input: &mut &[u8]) -> Result<Self, DecodeError> {
        let items = (0..N)
            .map(|_| T::decode(input))
            .collect::<Result<Vec<T>, _>>()?;
        Ok(items
            .try_into()
            .unwrap_or_else(|_| unreachable!("exactly N items decoded")))
    }
}

impl<T: StateCodec> StateCodec for Box<T> {
    fn encode(&self, out: &mut Vec<u8>) {
        (**self).encode(out);
    }
    fn decode(input: &mut &[u8]) -> Result<Self, DecodeError> {
        Ok(Box::new(T::decode(input)?))
    }
}

macro_rules! tuple_codec {
    ($($name:ident),+) => {
        impl<$($name: StateCodec),+> StateCodec for ($($name,)+) {
            #[allow(non_snake_case)]
            fn encode(&self, out: &mut Vec<u8>) {
                let ($($name,)+) = self;
                $($name.encode(out);)+
            }
            fn decode(input: &mut &[u8]) -> Result<Self, DecodeError> {
                Ok(($($name::decode(input)?,)+))
            }
        }
    };
}
tuple_codec!(A);
tuple_codec!(A, B);
tuple_codec!(A, B, C);
tuple_codec!(A, B, C, D);
tuple_codec!(A, B, C, D, E);
tuple_codec!(A, B, C, D, E, F);

/// Appends binary payload fields. All integers are little-endian; strings and byte strings are
/// `u32`-length-prefixed.
pub trait Writer {
    /// Appends a `u32`.
    fn put_u32(&mut self, v: u32);
    /// Appends a `u64`.
    fn put_u64(&mut self, v: u64);
    /// Appends an `f64` (its bits).
    fn put_f64(&mut self, v: f64);
    /// Appends a length-prefixed byte string.
    fn put_bytes(&mut self, v: &[u8]);
}

impl Writer for Vec<u8> {
    #[inline]
    fn put_u32(&mut self, v: u32) {
        self.extend_from_slice(&v.to_le_bytes());
    }
    #[inline]
    fn put_u64(&mut self, v: u64) {
        self.extend_from_slice(&v.to_le_bytes());
    }
    #[inline]
    fn put_f64(&mut self, v: f64) {
        self.put_u64(v.to_bits());
    }
    #[inline]
    fn put_bytes(&mut self, v: &[u8]) {
        let len = u32::try_from(v.len()).expect("payload fields are shorter than 4 GiB");
        self.put_u32(len);
        self.extend_from_slice(v);
    }
}

/// Reads the fields [`Writer`] wrote; every read checks its bounds and fails with
/// [`Malformed`] instead of panicking.
#[derive(Clone, Copy, Debug)]
pub struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    /// A reader over `payload`.
    #[inline]
    pub fn new(payload: &'a [u8]) -> Self {
        Reader { rest: payload }
    }

    #[inline]
    fn take(&mut self, n: usize) -> Result<&'a [u8], Malformed> {
        if self.rest.len() < n {
            return Err(Malformed::new("truncated payload"));
        }
        let (head, rest) = self.rest.split_at(n);
        self.rest = rest;
        Ok(head)
    }

    /// Reads a `u32`.
    #[inline]
    pub fn u32(&mut self) -> Result<u32, Malformed> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }

    /// Reads a `u64`.
    #[inline]
    pub fn u64(&mut self) -> Result<u64, Malformed> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }

    /// Reads an `f64`.
    #[inline]
    pub fn f64(&mut self) -> Result<f64, Malformed> {
        Ok(f64::from_bits(self.u64()?))
    }

    /// Reads a length-prefixed byte string.
    #[inline]
    pub fn bytes(&mut self) -> Result<&'a [u8], Malformed> {
        let len = self.u32()? as usize;
        self.take(len)
    }

    /// Reads a length-prefixed UTF-8 string.
    #[inline]
    pub fn str(&mut self) -> Result<&'a str, Malformed> {
        std::str::from_utf8(self.bytes()?)
            .map_err(|_| Malformed::new("payload string is not utf-8"))
    }

    /// Fails unless every byte was read.
    #[inline]
    pub fn finish(self) -> Result<(), Malformed> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(Malformed::new("trailing payload bytes"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codec_round_trip_and_vectors() {
        let v: (u64, Vec<f64>, Option<String>) = (7, vec![1.5, -0.0], Some("ab".into()));
        let mut out = Vec::new();
        v.encode(&mut out);
        assert_eq!(&out[..8], &7u64.to_le_bytes());
        assert_eq!(&out[8..12], &2u32.to_le_bytes());
        let mut input = &out[..];
        assert_eq!(
            <(u64, Vec<f64>, Option<String>)>::decode(&mut input).unwrap(),
            v
        );
        assert!(input.is_empty());
        let mut short = &out[..out.len() - 1];
        assert!(<(u64, Vec<f64>, Option<String>)>::decode(&mut short).is_err());
        let mut huge = &[0xff, 0xff, 0xff, 0xff][..];
        assert!(Vec::<u8>::decode(&mut huge).is_err());
    }

    fn round_trip<T: StateCodec + PartialEq + std::fmt::Debug>(v: &T) -> Vec<u8> {
        let mut out = Vec::new();
        v.encode(&mut out);
        let mut input = &out[..];
        assert_eq!(&T::decode(&mut input).unwrap(), v);
        assert!(input.is_empty());
        for cut in 0..out.len() {
            assert!(T::decode(&mut &out[..cut]).is_err(), "{v:?} cut at {cut}");
        }
        out
    }

    #[derive(StateCodec, Debug, PartialEq)]
    struct Named {
        count: u64,
        top: Vec<(i64, String)>,
    }

    #[derive(StateCodec, Debug, PartialEq)]
    struct Pair<T>(T, bool);

    #[derive(StateCodec, Debug, PartialEq)]
    enum Phase {
        Idle,
        Open { since_ms: u64 },
        Closed(u32, Option<u8>),
    }

    #[test]
    fn derived_codecs_are_the_fields_in_order() {
        let named = Named {
            count: 3,
            top: vec![(-1, "a".into())],
        };
        let mut by_hand = Vec::new();
        (3u64, vec![(-1i64, String::from("a"))]).encode(&mut by_hand);
        assert_eq!(round_trip(&named), by_hand);
        assert_eq!(round_trip(&Pair(7u16, true)), [7, 0, 1]);
        assert_eq!(round_trip(&Phase::Idle), [0]);
        assert_eq!(round_trip(&Phase::Open { since_ms: 1 })[..2], [1, 1]);
        assert_eq!(round_trip(&Phase::Closed(2, Some(9)))[..2], [2, 2]);
        assert!(Phase::decode(&mut &[3u8][..]).is_err());
    }

    #[test]
    fn ordered_collections_have_one_encoding() {
        let map: BTreeMap<u32, String> = [(2, "b".into()), (1, "a".into())].into();
        round_trip(&map);
        round_trip(&BTreeSet::from([3u8, 1, 2]));
        round_trip(&[1.5f32, -2.0]);
        round_trip(&(1u8, 2i8, 3i16, 4u128, 5usize, Box::new(6i128)));
        // Keys written out of order are refused, not silently reordered.
        let mut bytes = Vec::new();
        vec![(2u32, 0u8), (1, 0)].encode(&mut bytes);
        assert!(BTreeMap::<u32, u8>::decode(&mut &bytes[..]).is_err());
    }

    #[test]
    fn reader_never_panics() {
        let mut p = Vec::new();
        p.put_u64(5);
        p.put_bytes(b"host");
        let mut r = Reader::new(&p);
        assert_eq!(r.u64().unwrap(), 5);
        assert_eq!(r.str().unwrap(), "host");
        r.finish().unwrap();
        let mut r = Reader::new(&p[..10]);
        r.u64().unwrap();
        assert!(r.bytes().is_err());
    }
}
