//! The spec's notations (section 3): readers over an untrusted `Bytes` body
//! and writers into a `BytesMut`.
//!
//! [`Reader`] consumes a `Bytes` from the front; everything it hands out as
//! `Bytes` is a zero-copy slice of the body. Every read checks the remaining
//! length first and fails with [`ProtocolError::Truncated`]; every count read
//! from the wire is only trusted for pre-allocation up to what the remaining
//! bytes could possibly hold.
//!
//! Writers never fail: `[string]` is cut at a UTF-8 boundary past 65535
//! bytes, u16-counted lists and maps keep their first 65535 entries; a
//! `[short bytes]` over 65535 bytes or an int-prefixed item over `i32::MAX`
//! bytes is a programmer error and panics.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use bytes::{BufMut, Bytes, BytesMut};
use types::Consistency;
use uuid::Uuid;

use crate::error::ProtocolError;
use crate::request::BoundValue;

type Result<T> = std::result::Result<T, ProtocolError>;

/// A cursor over an untrusted message body.
#[derive(Clone, Debug)]
pub struct Reader {
    buf: Bytes,
}

impl Reader {
    pub fn new(buf: Bytes) -> Reader {
        Reader { buf }
    }

    pub fn remaining(&self) -> usize {
        self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Whatever has not been read yet (zero-copy).
    pub fn into_rest(self) -> Bytes {
        self.buf
    }

    /// Takes everything not read yet (zero-copy), leaving the reader empty.
    pub fn take_rest(&mut self) -> Bytes {
        std::mem::take(&mut self.buf)
    }

    /// A capacity to pre-allocate for `count` items of at least `min_item_len`
    /// bytes each: never more than the remaining bytes could hold.
    pub fn bounded_capacity(&self, count: usize, min_item_len: usize) -> usize {
        count.min(self.remaining() / min_item_len.max(1))
    }

    /// Takes the next `n` bytes as a zero-copy slice.
    pub fn take(&mut self, n: usize, what: &'static str) -> Result<Bytes> {
        if n > self.buf.len() {
            return Err(ProtocolError::Truncated { what, needed: n, remaining: self.buf.len() });
        }
        Ok(self.buf.split_to(n))
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N]> {
        let b = self.take(N, what)?;
        <[u8; N]>::try_from(&b[..]).map_err(|_| ProtocolError::Truncated { what, needed: N, remaining: b.len() })
    }

    /// A `[byte]`.
    pub fn read_u8(&mut self) -> Result<u8> {
        Ok(self.array::<1>("a [byte]")?[0])
    }

    /// A `[short]`: 2-byte unsigned.
    pub fn read_short(&mut self) -> Result<u16> {
        Ok(u16::from_be_bytes(self.array("a [short]")?))
    }

    /// An `[int]`: 4-byte signed.
    pub fn read_int(&mut self) -> Result<i32> {
        Ok(i32::from_be_bytes(self.array("an [int]")?))
    }

    /// A `[long]`: 8-byte signed.
    pub fn read_long(&mut self) -> Result<i64> {
        Ok(i64::from_be_bytes(self.array("a [long]")?))
    }

    /// A `[string]`: `[short]` length then UTF-8.
    pub fn read_string(&mut self) -> Result<String> {
        let n = self.read_short()? as usize;
        let b = self.take(n, "a [string]")?;
        utf8(b, "a [string]")
    }

    /// A `[long string]`: `[int]` length then UTF-8.
    pub fn read_long_string(&mut self) -> Result<String> {
        let n = self.read_int()?;
        let n = usize::try_from(n).map_err(|_| ProtocolError::NegativeLength { what: "a [long string]", len: n })?;
        let b = self.take(n, "a [long string]")?;
        utf8(b, "a [long string]")
    }

    /// A `[uuid]`: 16 bytes.
    pub fn read_uuid(&mut self) -> Result<Uuid> {
        Ok(Uuid::from_bytes(self.array("a [uuid]")?))
    }

    /// A `[string list]`.
    pub fn read_string_list(&mut self) -> Result<Vec<String>> {
        let n = self.read_short()? as usize;
        let mut v = Vec::with_capacity(self.bounded_capacity(n, 2));
        for _ in 0..n {
            v.push(self.read_string()?);
        }
        Ok(v)
    }

    /// A `[bytes]`: `[int]` length, any negative length is null.
    pub fn read_bytes(&mut self) -> Result<Option<Bytes>> {
        let n = self.read_int()?;
        match usize::try_from(n) {
            Ok(n) => Ok(Some(self.take(n, "a [bytes]")?)),
            Err(_) => Ok(None),
        }
    }

    /// A `[value]`: like `[bytes]`, but -1 is null, -2 is "not set" and any
    /// other negative length is an error.
    pub fn read_value(&mut self) -> Result<BoundValue> {
        let n = self.read_int()?;
        match n {
            -1 => Ok(BoundValue::Null),
            -2 => Ok(BoundValue::Unset),
            n if n < 0 => Err(ProtocolError::InvalidValueLength(n)),
            n => Ok(BoundValue::Set(self.take(n as usize, "a [value]")?)),
        }
    }

    /// A `[short bytes]`.
    pub fn read_short_bytes(&mut self) -> Result<Bytes> {
        let n = self.read_short()? as usize;
        self.take(n, "a [short bytes]")
    }

    /// An `[inet]`: address size (4 or 16), address, `[int]` port.
    pub fn read_inet(&mut self) -> Result<SocketAddr> {
        let size = self.read_u8()?;
        let ip = match size {
            4 => IpAddr::V4(Ipv4Addr::from(self.array::<4>("an [inet] address")?)),
            16 => IpAddr::V6(Ipv6Addr::from(self.array::<16>("an [inet] address")?)),
            other => return Err(ProtocolError::InvalidInetLength(other)),
        };
        let port = self.read_int()?;
        // Ports are 16-bit; Cassandra writes them as an [int]. Keep the low bits.
        Ok(SocketAddr::new(ip, port as u16))
    }

    /// A `[consistency]`.
    pub fn read_consistency(&mut self) -> Result<Consistency> {
        let code = self.read_short()?;
        Consistency::from_code(code).ok_or(ProtocolError::UnknownConsistency(code))
    }

    /// A `[string map]`. A repeated key keeps its last value, as Cassandra's
    /// HashMap does.
    pub fn read_string_map(&mut self) -> Result<BTreeMap<String, String>> {
        let n = self.read_short()?;
        let mut m = BTreeMap::new();
        for _ in 0..n {
            let k = self.read_string()?;
            let v = self.read_string()?;
            m.insert(k, v);
        }
        Ok(m)
    }

    /// A `[string multimap]`.
    pub fn read_string_multimap(&mut self) -> Result<BTreeMap<String, Vec<String>>> {
        let n = self.read_short()?;
        let mut m = BTreeMap::new();
        for _ in 0..n {
            let k = self.read_string()?;
            let v = self.read_string_list()?;
            m.insert(k, v);
        }
        Ok(m)
    }

    /// A `[bytes map]`, in wire order.
    pub fn read_bytes_map(&mut self) -> Result<Vec<(String, Option<Bytes>)>> {
        let n = self.read_short()? as usize;
        let mut v = Vec::with_capacity(self.bounded_capacity(n, 6));
        for _ in 0..n {
            let k = self.read_string()?;
            let b = self.read_bytes()?;
            v.push((k, b));
        }
        Ok(v)
    }
}

fn utf8(b: Bytes, what: &'static str) -> Result<String> {
    match std::str::from_utf8(&b) {
        Ok(s) => Ok(s.to_owned()),
        Err(_) => Err(ProtocolError::InvalidUtf8 { what }),
    }
}

fn short_len(len: usize, what: &str) -> u16 {
    u16::try_from(len).unwrap_or_else(|_| panic!("{what} of {len} bytes does not fit a [short] length"))
}

fn int_len(len: usize, what: &str) -> i32 {
    i32::try_from(len).unwrap_or_else(|_| panic!("{what} of {len} bytes does not fit an [int] length"))
}

/// The longest prefix of `s` that is at most `max` bytes and ends on a char
/// boundary.
fn cut_utf8(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Overwrites the `N` bytes at `at` with `bytes`: a placeholder (a length, a flags byte) written
/// earlier and patched once what follows it is known.
pub(crate) fn patch<const N: usize>(out: &mut BytesMut, at: usize, bytes: [u8; N]) {
    let slot: &mut [u8; N] = out
        .get_mut(at..at.saturating_add(N))
        .and_then(|s| s.try_into().ok())
        .expect("a patch covers bytes written before it");
    *slot = bytes;
}

pub fn write_u8(out: &mut BytesMut, v: u8) {
    out.put_u8(v);
}

pub fn write_short(out: &mut BytesMut, v: u16) {
    out.put_u16(v);
}

pub fn write_int(out: &mut BytesMut, v: i32) {
    out.put_i32(v);
}

pub fn write_long(out: &mut BytesMut, v: i64) {
    out.put_i64(v);
}

/// A `[string]`; cut at a char boundary past 65535 bytes.
pub fn write_string(out: &mut BytesMut, s: &str) {
    let s = cut_utf8(s, u16::MAX as usize);
    out.put_u16(s.len() as u16);
    out.put_slice(s.as_bytes());
}

pub fn write_long_string(out: &mut BytesMut, s: &str) {
    out.put_i32(int_len(s.len(), "a [long string]"));
    out.put_slice(s.as_bytes());
}

pub fn write_uuid(out: &mut BytesMut, u: &Uuid) {
    out.put_slice(u.as_bytes());
}

/// A `[string list]`; keeps the first 65535 strings.
pub fn write_string_list<S: AsRef<str>>(out: &mut BytesMut, list: &[S]) {
    let n = list.len().min(u16::MAX as usize);
    out.put_u16(n as u16);
    for s in list.iter().take(n) {
        write_string(out, s.as_ref());
    }
}

/// A `[bytes]`; `None` is null (-1).
pub fn write_bytes(out: &mut BytesMut, b: Option<&[u8]>) {
    match b {
        Some(b) => {
            out.put_i32(int_len(b.len(), "a [bytes]"));
            out.put_slice(b);
        }
        None => out.put_i32(-1),
    }
}

/// A `[value]`.
pub fn write_value(out: &mut BytesMut, v: &BoundValue) {
    match v {
        BoundValue::Null => out.put_i32(-1),
        BoundValue::Unset => out.put_i32(-2),
        BoundValue::Set(b) => write_bytes(out, Some(b)),
    }
}

pub fn write_short_bytes(out: &mut BytesMut, b: &[u8]) {
    out.put_u16(short_len(b.len(), "a [short bytes]"));
    out.put_slice(b);
}

pub fn write_inet(out: &mut BytesMut, addr: &SocketAddr) {
    match addr.ip() {
        IpAddr::V4(ip) => {
            out.put_u8(4);
            out.put_slice(&ip.octets());
        }
        IpAddr::V6(ip) => {
            out.put_u8(16);
            out.put_slice(&ip.octets());
        }
    }
    out.put_i32(i32::from(addr.port()));
}

pub fn write_consistency(out: &mut BytesMut, c: Consistency) {
    out.put_u16(c.code());
}

/// A `[string map]`; keeps the first 65535 entries.
pub fn write_string_map<'a>(out: &mut BytesMut, map: impl ExactSizeIterator<Item = (&'a str, &'a str)>) {
    let n = map.len().min(u16::MAX as usize);
    out.put_u16(n as u16);
    for (k, v) in map.take(n) {
        write_string(out, k);
        write_string(out, v);
    }
}

/// A `[string multimap]`; keeps the first 65535 entries.
pub fn write_string_multimap(out: &mut BytesMut, map: &BTreeMap<String, Vec<String>>) {
    let n = map.len().min(u16::MAX as usize);
    out.put_u16(n as u16);
    for (k, v) in map.iter().take(n) {
        write_string(out, k);
        write_string_list(out, v);
    }
}

/// A `[bytes map]`; keeps the first 65535 entries.
pub fn write_bytes_map(out: &mut BytesMut, map: &[(String, Option<Bytes>)]) {
    let n = map.len().min(u16::MAX as usize);
    out.put_u16(n as u16);
    for (k, v) in map.iter().take(n) {
        write_string(out, k);
        write_bytes(out, v.as_deref());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reader(b: &[u8]) -> Reader {
        Reader::new(Bytes::copy_from_slice(b))
    }

    #[test]
    fn primitives_round_trip() {
        let mut out = BytesMut::new();
        write_u8(&mut out, 7);
        write_short(&mut out, 0xBEEF);
        write_int(&mut out, -5);
        write_long(&mut out, i64::MIN);
        write_string(&mut out, "héllo");
        write_long_string(&mut out, "SELECT * FROM t");
        let u = Uuid::from_u128(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef);
        write_uuid(&mut out, &u);
        write_string_list(&mut out, &["a", "bc"]);
        write_bytes(&mut out, Some(b"xyz"));
        write_bytes(&mut out, None);
        write_value(&mut out, &BoundValue::Unset);
        write_short_bytes(&mut out, b"id");
        let v4: SocketAddr = "10.0.0.1:9042".parse().unwrap();
        let v6: SocketAddr = "[::1]:7000".parse().unwrap();
        write_inet(&mut out, &v4);
        write_inet(&mut out, &v6);
        write_consistency(&mut out, Consistency::LocalQuorum);
        let mut mm = BTreeMap::new();
        mm.insert("K".to_string(), vec!["v1".to_string(), "v2".to_string()]);
        write_string_multimap(&mut out, &mm);
        write_bytes_map(&mut out, &[("k".to_string(), None), ("j".to_string(), Some(Bytes::from_static(b"1")))]);

        let mut r = Reader::new(out.freeze());
        assert_eq!(r.read_u8().unwrap(), 7);
        assert_eq!(r.read_short().unwrap(), 0xBEEF);
        assert_eq!(r.read_int().unwrap(), -5);
        assert_eq!(r.read_long().unwrap(), i64::MIN);
        assert_eq!(r.read_string().unwrap(), "héllo");
        assert_eq!(r.read_long_string().unwrap(), "SELECT * FROM t");
        assert_eq!(r.read_uuid().unwrap(), u);
        assert_eq!(r.read_string_list().unwrap(), vec!["a", "bc"]);
        assert_eq!(r.read_bytes().unwrap().as_deref(), Some(&b"xyz"[..]));
        assert_eq!(r.read_bytes().unwrap(), None);
        assert_eq!(r.read_value().unwrap(), BoundValue::Unset);
        assert_eq!(&r.read_short_bytes().unwrap()[..], b"id");
        assert_eq!(r.read_inet().unwrap(), v4);
        assert_eq!(r.read_inet().unwrap(), v6);
        assert_eq!(r.read_consistency().unwrap(), Consistency::LocalQuorum);
        assert_eq!(r.read_string_multimap().unwrap(), mm);
        let bm = r.read_bytes_map().unwrap();
        assert_eq!(bm.len(), 2);
        assert_eq!(bm[1].1.as_deref(), Some(&b"1"[..]));
        assert!(r.is_empty());
    }

    #[test]
    fn truncation_and_bad_lengths_are_errors() {
        assert!(matches!(reader(&[0, 5, b'a']).read_string(), Err(ProtocolError::Truncated { .. })));
        assert!(matches!(
            reader(&[0xFF, 0xFF, 0xFF, 0xFE]).read_long_string(),
            Err(ProtocolError::NegativeLength { .. })
        ));
        assert_eq!(reader(&[0xFF, 0xFF, 0xFF, 0xFD]).read_value(), Err(ProtocolError::InvalidValueLength(-3)));
        assert_eq!(reader(&[0xFF, 0xFF, 0xFF, 0xFD]).read_bytes(), Ok(None));
        assert_eq!(reader(&[0, 0x0B]).read_consistency(), Err(ProtocolError::UnknownConsistency(11)));
        assert_eq!(reader(&[5, 1, 2, 3, 4, 5, 0, 0, 0, 1]).read_inet(), Err(ProtocolError::InvalidInetLength(5)));
        assert!(matches!(reader(&[0, 1, 0xFF]).read_string(), Err(ProtocolError::InvalidUtf8 { .. })));
        // A huge count with no bytes behind it fails without allocating.
        assert!(reader(&[0xFF, 0xFF]).read_string_list().is_err());
        assert!(reader(&[0x7F, 0xFF, 0xFF, 0xFF]).read_bytes().is_err());
    }

    #[test]
    fn long_strings_are_cut_on_char_boundaries() {
        let s = "é".repeat(40_000); // 80_000 bytes
        let mut out = BytesMut::new();
        write_string(&mut out, &s);
        let got = Reader::new(out.freeze()).read_string().unwrap();
        assert_eq!(got.len(), 65534);
        assert!(s.starts_with(&got));
    }
}
