//! `ByteReader`: the one bounds-checked, big-endian reader over a byte slice
//! that the hand-encoded formats share (the cluster verbs' payloads, storage's
//! raw partitions, paging states, the CQL value codec). Formats that hand out
//! shared `Bytes` (the native protocol, internode frames) have readers of
//! their own shape.
//!
//! Invariants:
//! - No read panics or reads past the end: a short input gives back the
//!   reader's error value, and the position does not move.

use uuid::Uuid;

/// Reads fixed-width big-endian numbers and length-prefixed blobs from a
/// slice; a read past the end returns `err` (cloned).
#[derive(Clone, Debug)]
pub struct ByteReader<'a, E: Clone> {
    buf: &'a [u8],
    pos: usize,
    err: E,
}

impl<'a, E: Clone> ByteReader<'a, E> {
    pub fn new(buf: &'a [u8], err: E) -> Self {
        ByteReader { buf, pos: 0, err }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// The error this reader gives back, for checks of the caller's own
    /// (a count that cannot fit, trailing bytes).
    pub fn error(&self) -> E {
        self.err.clone()
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], E> {
        let end = self.pos.checked_add(n).ok_or_else(|| self.err.clone())?;
        let s = self.buf.get(self.pos..end).ok_or_else(|| self.err.clone())?;
        self.pos = end;
        Ok(s)
    }

    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], E> {
        let s = self.take(N)?;
        s.try_into().map_err(|_| self.err.clone())
    }

    pub fn u8(&mut self) -> Result<u8, E> {
        Ok(self.array::<1>()?[0])
    }

    pub fn u16(&mut self) -> Result<u16, E> {
        self.array().map(u16::from_be_bytes)
    }

    pub fn u32(&mut self) -> Result<u32, E> {
        self.array().map(u32::from_be_bytes)
    }

    pub fn i32(&mut self) -> Result<i32, E> {
        self.array().map(i32::from_be_bytes)
    }

    pub fn u64(&mut self) -> Result<u64, E> {
        self.array().map(u64::from_be_bytes)
    }

    pub fn i64(&mut self) -> Result<i64, E> {
        self.array().map(i64::from_be_bytes)
    }

    pub fn uuid(&mut self) -> Result<Uuid, E> {
        self.array().map(Uuid::from_bytes)
    }

    /// A blob with a `u32` length prefix.
    pub fn blob(&mut self) -> Result<&'a [u8], E> {
        let len = self.u32()? as usize;
        self.take(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_in_order_and_stops_at_the_end() {
        let mut buf = vec![7u8];
        buf.extend_from_slice(&0x0102u16.to_be_bytes());
        buf.extend_from_slice(&(-5i32).to_be_bytes());
        buf.extend_from_slice(&u64::MAX.to_be_bytes());
        buf.extend_from_slice(&3u32.to_be_bytes());
        buf.extend_from_slice(b"abc");
        let mut r = ByteReader::new(&buf, "short");
        assert_eq!(r.u8(), Ok(7));
        assert_eq!(r.u16(), Ok(0x0102));
        assert_eq!(r.i32(), Ok(-5));
        assert_eq!(r.u64(), Ok(u64::MAX));
        assert_eq!(r.blob(), Ok(&b"abc"[..]));
        assert!(r.is_empty());
        assert_eq!(r.u8(), Err("short"));
        // A blob longer than what is left: an error, and nothing consumed.
        let mut r = ByteReader::new(&[0, 0, 0, 9, 1], ());
        assert_eq!(r.blob(), Err(()));
        let mut r = ByteReader::new(&[0u8; 3], ());
        assert_eq!(r.take(usize::MAX), Err(()));
        assert_eq!(r.remaining(), 3);
    }
}
