//! Paging: where a paged read resumes (`Position`, the opaque paging state
//! drivers send back) and the token interval of a range plan.
//!
//! Invariant: a position names the last partition and row returned and
//! whether that partition is finished, so a page resumes exactly after it.

use super::*;

/// Partition keys asked of the data plane at a time by a range scan.
pub(super) const SCAN_BATCH: usize = 64;

/// The inclusive token interval of a Range plan's bounds (`(token, inclusive)`),
/// or `None` when it is empty.
pub(super) fn token_bounds(start: &Option<(i64, bool)>, end: &Option<(i64, bool)>) -> Option<(i64, i64)> {
    let lo = match *start {
        Some((t, true)) => t,
        Some((t, false)) => t.checked_add(1)?,
        None => i64::MIN,
    };
    let hi = match *end {
        Some((t, true)) => t,
        Some((t, false)) => t.checked_sub(1)?,
        None => i64::MAX,
    };
    (lo <= hi).then_some((lo, hi))
}

/// Where a paged read resumes.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Position {
    /// Index into the key list (Keys plans) or the virtual rows.
    pub(super) index: u32,
    pub(super) token: i64,
    pub(super) partition_key: Vec<u8>,
    /// Last clustering returned in that partition (`None`: start of partition).
    pub(super) after: Option<Vec<Vec<u8>>>,
    /// Rows already returned from that partition (PER PARTITION LIMIT).
    pub(super) in_partition: u32,
    /// Rows still allowed by LIMIT.
    pub(super) remaining: u32,
    /// The static-only row of that partition was returned.
    pub(super) started: bool,
    /// Every row of that partition was returned: a Range plan resumes at the
    /// next partition, never inside this one again.
    pub(super) done: bool,
}

impl Position {
    /// The first byte of an encoded state; states of another format are refused.
    const FORMAT: u8 = 2;

    /// Moves to the start of the partition `key` at `token`.
    pub(super) fn enter(&mut self, token: i64, key: Vec<u8>) {
        self.token = token;
        self.partition_key = key;
        self.after = None;
        self.in_partition = 0;
        self.started = false;
        self.done = false;
    }

    pub(super) fn encode(&self) -> Bytes {
        let mut b = BytesMut::new();
        b.put_u8(Self::FORMAT);
        b.put_u32(self.index);
        b.put_i64(self.token);
        b.put_u32(self.partition_key.len() as u32);
        b.put_slice(&self.partition_key);
        match &self.after {
            None => b.put_u8(0),
            Some(c) => {
                b.put_u8(1);
                b.put_u16(c.len() as u16);
                for v in c {
                    b.put_u32(v.len() as u32);
                    b.put_slice(v);
                }
            }
        }
        b.put_u32(self.in_partition);
        b.put_u32(self.remaining);
        b.put_u8(self.started as u8 | (self.done as u8) << 1);
        b.freeze()
    }

    pub(super) fn decode(b: &[u8]) -> Option<Position> {
        Self::read(&mut ByteReader::new(b, ())).ok()
    }

    pub(super) fn read(r: &mut ByteReader<'_, ()>) -> Result<Position, ()> {
        if r.u8()? != Self::FORMAT {
            return Err(());
        }
        let index = r.u32()?;
        let token = r.i64()?;
        let partition_key = r.blob()?.to_vec();
        let after = match r.u8()? {
            0 => None,
            _ => {
                let n = r.u16()?;
                let mut c = Vec::new();
                for _ in 0..n {
                    c.push(r.blob()?.to_vec());
                }
                Some(c)
            }
        };
        let in_partition = r.u32()?;
        let remaining = r.u32()?;
        let flags = r.u8()?;
        if !r.is_empty() || flags > 3 {
            return Err(());
        }
        let (started, done) = (flags & 1 != 0, flags & 2 != 0);
        Ok(Position { index, token, partition_key, after, in_partition, remaining, started, done })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paging_state_round_trips_and_refuses_damage() {
        let p = Position {
            index: 3,
            token: -42,
            partition_key: b"pk".to_vec(),
            after: Some(vec![b"c1".to_vec(), Vec::new()]),
            in_partition: 7,
            remaining: 9,
            started: true,
            done: true,
        };
        let bytes = p.encode();
        assert_eq!(Position::decode(&bytes), Some(p.clone()));
        let none = Position { after: None, started: false, done: false, ..p };
        assert_eq!(Position::decode(&none.encode()), Some(none));
        // Every truncation, a trailing byte, another format, unknown flags: refused.
        for cut in 0..bytes.len() {
            assert_eq!(Position::decode(&bytes[..cut]), None, "cut at {cut}");
        }
        assert_eq!(Position::decode(&[bytes.as_ref(), &[0]].concat()), None);
        let mut other = bytes.to_vec();
        other[0] = 1;
        assert_eq!(Position::decode(&other), None, "format 1 (before `done`)");
        let mut flags = bytes.to_vec();
        *flags.last_mut().unwrap() = 4;
        assert_eq!(Position::decode(&flags), None);
    }

    #[test]
    fn token_bounds_are_inclusive_and_empty_when_crossed() {
        assert_eq!(token_bounds(&None, &None), Some((i64::MIN, i64::MAX)));
        assert_eq!(token_bounds(&Some((5, false)), &Some((9, true))), Some((6, 9)));
        assert_eq!(token_bounds(&Some((5, true)), &Some((5, false))), None);
        assert_eq!(token_bounds(&Some((i64::MAX, false)), &None), None);
        assert_eq!(token_bounds(&None, &Some((i64::MIN, false))), None);
    }
}
