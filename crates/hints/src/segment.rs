//! Reading segment files: the header check and the record walk shared by
//! recovery (`HintStore::open`) and replay (`HintStore::next_batch`).
//!
//! Invariants:
//! - A walk stops at the first record that is torn (ends past the readable
//!   end) or corrupt (bad checksum, impossible length) and reports it as
//!   `Damage` with its offset; every record before it is returned. Nothing
//!   after it in the same segment is trusted.
//! - No input panics: lengths are checked against the bytes left before any
//!   allocation, and the payload limit bounds the allocation anyway.

use crate::format::{HeaderError, RecordHeader, SegmentHeader, HEADER_LEN, MAX_PAYLOAD_LEN, RECORD_HEADER_LEN};
use crate::Hint;
use std::fs::File;
use std::io::{self, BufReader, Read, Seek, SeekFrom};
use std::path::Path;

/// Why a walk stopped early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DamageKind {
    /// The record ends past the readable end: an interrupted append (or a
    /// length field damaged into one that points past the end).
    Torn,
    /// The record is all there but its checksum or length is wrong.
    Corrupt,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Damage {
    /// Offset of the first untrusted record.
    pub offset: u64,
    pub kind: DamageKind,
    pub detail: String,
}

/// What a walk over `[start, end)` found.
#[derive(Debug, Default)]
pub(crate) struct Walk {
    /// The hints, in file order (empty when payloads were not kept).
    pub hints: Vec<Hint>,
    /// Number of valid records walked.
    pub records: u64,
    /// Offset just past the last valid record walked (`start` if none).
    pub next: u64,
    /// Newest `created_at_ms` among the records walked (`i64::MIN` if none).
    pub max_created_at_ms: i64,
    pub damage: Option<Damage>,
}

/// Reads and checks the header of the segment at `path`; also returns the file length.
pub(crate) fn read_header(path: &Path) -> io::Result<(Result<SegmentHeader, HeaderError>, u64)> {
    let mut file = File::open(path)?;
    let file_len = file.metadata()?.len();
    let mut buf = [0u8; HEADER_LEN as usize];
    let n = read_full(&mut file, &mut buf)?;
    // `read_full` reads at most `buf.len()` bytes, so `get` always succeeds.
    Ok((SegmentHeader::decode(buf.get(..n).unwrap_or_default()), file_len))
}

/// Walks the records of `path` from offset `start` up to `end` (exclusive).
///
/// Stops before a record that would take the walked bytes past `max_bytes`,
/// except that the first record is always taken (so a hint larger than the
/// budget is still delivered). `keep_payloads: false` checks records without
/// keeping them (recovery).
pub(crate) fn walk(path: &Path, start: u64, end: u64, max_bytes: u64, keep_payloads: bool) -> io::Result<Walk> {
    let mut file = File::open(path)?;
    file.seek(SeekFrom::Start(start))?;
    let capacity = end.saturating_sub(start).clamp(RECORD_HEADER_LEN, 64 << 10) as usize;
    let mut reader = BufReader::with_capacity(capacity, file);
    let mut out = Walk { next: start, max_created_at_ms: i64::MIN, ..Walk::default() };
    let mut payload = Vec::new();
    let mut walked = 0u64;
    let damage = |offset, kind, detail: String| Some(Damage { offset, kind, detail });
    while out.next < end {
        let pos = out.next;
        let left = end - pos;
        if left < RECORD_HEADER_LEN {
            out.damage = damage(pos, DamageKind::Torn, format!("{left} trailing bytes, shorter than a record header"));
            break;
        }
        let mut fixed = [0u8; RECORD_HEADER_LEN as usize];
        let n = read_full(&mut reader, &mut fixed)?;
        if n < fixed.len() {
            out.damage = damage(pos, DamageKind::Torn, format!("file ends {n} bytes into a record header"));
            break;
        }
        let header = RecordHeader::decode(&fixed);
        if header.len as usize > MAX_PAYLOAD_LEN {
            out.damage = damage(
                pos,
                DamageKind::Corrupt,
                format!("record length {} over the {MAX_PAYLOAD_LEN}-byte limit", header.len),
            );
            break;
        }
        if header.record_len() > left {
            out.damage = damage(
                pos,
                DamageKind::Torn,
                format!("record of {} bytes runs past the end ({left} bytes left)", header.record_len()),
            );
            break;
        }
        if out.records > 0 && walked + header.record_len() > max_bytes {
            break;
        }
        payload.resize(header.len as usize, 0);
        let n = read_full(&mut reader, &mut payload)?;
        if n < payload.len() {
            out.damage =
                damage(pos, DamageKind::Torn, format!("file ends {n} bytes into a {}-byte payload", header.len));
            break;
        }
        if !header.verify(&payload) {
            out.damage = damage(pos, DamageKind::Corrupt, "record checksum mismatch".to_string());
            break;
        }
        out.records += 1;
        out.max_created_at_ms = out.max_created_at_ms.max(header.created_at_ms);
        if keep_payloads {
            out.hints.push(Hint { created_at_ms: header.created_at_ms, payload: std::mem::take(&mut payload) });
        }
        walked += header.record_len();
        out.next = pos + header.record_len();
    }
    Ok(out)
}

/// Reads until `buf` is full or the reader is at its end; returns the bytes read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while let Some(rest) = buf.get_mut(filled..).filter(|rest| !rest.is_empty()) {
        match r.read(rest) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::encode_record;
    use uuid::Uuid;

    /// A reader that hands out at most 3 bytes per call, as a pipe or a slow disk may.
    struct Trickle<'a>(&'a [u8]);

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = buf.len().min(self.0.len()).min(3);
            let (head, rest) = self.0.split_at(n);
            buf[..n].copy_from_slice(head);
            self.0 = rest;
            Ok(n)
        }
    }

    #[test]
    fn read_full_stops_at_the_end_of_input_or_buffer() {
        let data: Vec<u8> = (0..10).collect();
        let mut buf = [0u8; 7];
        assert_eq!(read_full(&mut Trickle(&data), &mut buf).unwrap(), 7);
        assert_eq!(buf, [0, 1, 2, 3, 4, 5, 6]);
        let mut buf = [0u8; 16];
        assert_eq!(read_full(&mut Trickle(&data), &mut buf).unwrap(), 10);
        assert_eq!(read_full(&mut Trickle(&data), &mut []).unwrap(), 0);
    }

    #[test]
    fn truncated_header_and_records_are_damage_not_panics() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.hints");
        let mut bytes = SegmentHeader { target: Uuid::from_u128(7), created_at_ms: 1 }.encode().to_vec();
        encode_record(5, b"payload", &mut bytes);
        for cut in 0..bytes.len() {
            std::fs::write(&path, &bytes[..cut]).unwrap();
            let (header, len) = read_header(&path).unwrap();
            assert_eq!(len, cut as u64);
            if cut < HEADER_LEN as usize {
                assert_eq!(header, Err(HeaderError::Short { len: cut }));
                continue;
            }
            assert!(header.is_ok());
            // Walk to the real end of the file and to where the record should end.
            for end in [cut as u64, bytes.len() as u64] {
                let walk = walk(&path, HEADER_LEN, end, u64::MAX, true).unwrap();
                assert!(walk.hints.is_empty(), "cut {cut} end {end}");
                if end > HEADER_LEN {
                    assert_eq!(walk.damage.map(|d| d.kind), Some(DamageKind::Torn), "cut {cut} end {end}");
                }
            }
        }
    }
}
