//! Text forms of CQL values: parsing the string literals Cassandra accepts for
//! timestamps, dates, times, durations, inets and UUIDs; printing values as
//! CQL literals; and the date/time/time-UUID arithmetic CQL functions need
//! (`toDate`, `toTimestamp`, `toUnixTimestamp`, `minTimeuuid`, `maxTimeuuid`).
//!
//! Invariants:
//! - Pure: no clock, no time zone database. Shoal runs in UTC, so a timestamp
//!   without a zone is UTC; functions that need "now" take it as a parameter.
//! - Error messages are Cassandra's (`TimestampSerializer`,
//!   `SimpleDateSerializer`, `TimeSerializer`, `cql3.Duration`, ...).
//! - `Value::to_cql_literal` prints a literal that parses back (through
//!   Shoal's CQL layer and these parsers) to the same value.
//! - Calendar math is the proleptic Gregorian calendar on `i64` days since
//!   1970-01-01, like `java.time`.

use std::fmt::Write as _;
use std::net::IpAddr;

use num_bigint::Sign;
use uuid::Uuid;

use crate::value::{Value, ValueError};
use crate::CqlType;

pub const NANOS_PER_DAY: i64 = 86_400_000_000_000;
pub const MILLIS_PER_DAY: i64 = 86_400_000;
/// The wire value of the `date` 1970-01-01.
pub const DATE_EPOCH: u32 = 1 << 31;
/// Unix milliseconds of the UUID epoch, 1582-10-15T00:00:00Z.
pub const UUID_EPOCH_UNIX_MILLIS: i64 = -12_219_292_800_000;
/// The smallest lsb of a time UUID under `TimeUUIDType`'s signed-byte order.
pub const MIN_CLOCK_SEQ_AND_NODE: u64 = 0x8080_8080_8080_8080;
/// The largest lsb of a time UUID under `TimeUUIDType`'s signed-byte order.
pub const MAX_CLOCK_SEQ_AND_NODE: u64 = 0x7f7f_7f7f_7f7f_7f7f;

const NANOS_PER_MICRO: i64 = 1_000;
const NANOS_PER_MILLI: i64 = 1_000_000;
const NANOS_PER_SECOND: i64 = 1_000_000_000;
const NANOS_PER_MINUTE: i64 = 60 * NANOS_PER_SECOND;
const NANOS_PER_HOUR: i64 = 60 * NANOS_PER_MINUTE;

// ---------------------------------------------------------------------------
// Calendar.

/// Days since 1970-01-01 of a proleptic Gregorian date (month 1..=12).
pub fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(month);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The proleptic Gregorian (year, month, day) of a day count since 1970-01-01.
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

fn is_leap(year: i64) -> bool {
    year.rem_euclid(4) == 0 && (year.rem_euclid(100) != 0 || year.rem_euclid(400) == 0)
}

fn days_in_month(year: i64, month: u64) -> u64 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if is_leap(year) => 29,
        2 => 28,
        _ => 0,
    }
}

/// `java.time.LocalDate.toString` of a year: 4 digits at least, `+` above 9999.
fn format_year(year: i64, out: &mut String) {
    if year > 9999 {
        let _ = write!(out, "+{year}");
    } else if year < 0 {
        let _ = write!(out, "-{:04}", year.unsigned_abs());
    } else {
        let _ = write!(out, "{year:04}");
    }
}

fn iso_date_of_days(days: i64) -> String {
    let (y, m, d) = civil_from_days(days);
    let mut s = String::new();
    format_year(y, &mut s);
    let _ = write!(s, "-{m:02}-{d:02}");
    s
}

// ---------------------------------------------------------------------------
// A tiny scanner for the fixed grammars below.

struct Scan<'a> {
    s: &'a [u8],
    i: usize,
}

impl<'a> Scan<'a> {
    fn new(s: &'a str) -> Self {
        Scan { s: s.as_bytes(), i: 0 }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn peek_at(&self, k: usize) -> Option<u8> {
        self.s.get(self.i + k).copied()
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.peek() == Some(c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn done(&self) -> bool {
        self.i >= self.s.len()
    }

    /// Between `min` and `max` ASCII digits: (value, digit count); `None` if
    /// fewer than `min` digits or the value overflows `u64`.
    fn digits(&mut self, min: usize, max: usize) -> Option<(u64, usize)> {
        let start = self.i;
        let mut v: u64 = 0;
        while self.i - start < max {
            match self.peek() {
                Some(c @ b'0'..=b'9') => {
                    v = v.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
                    self.i += 1;
                }
                _ => break,
            }
        }
        let n = self.i - start;
        if n < min {
            return None;
        }
        Some((v, n))
    }
}

/// Java's `^-?\d+$` (ASCII digits).
fn is_raw_integer(s: &str) -> bool {
    let body = s.strip_prefix('-').unwrap_or(s);
    !body.is_empty() && body.bytes().all(|c| c.is_ascii_digit())
}

// ---------------------------------------------------------------------------
// Timestamps.

/// Parses a timestamp literal to milliseconds since the Unix epoch, as
/// Cassandra's `TimestampSerializer.dateStringToTimestamp` does (with the
/// JVM in UTC):
/// - an integer string (`-?\d+`) is milliseconds;
/// - `yyyy-mm-dd` followed by an optional time ` HH:mm[:ss][.fff]` or
///   `THH:mm[:ss][.fff]` (1 to 9 fraction digits, truncated to ms) and an
///   optional zone: `Z`, `+hh`, `+hhmm`, `+hh:mm` (optionally after a space),
///   or ` UTC`/` GMT`/` UT` with an optional offset (`GMT+01:00`). No zone
///   means UTC. Date-only literals need 2-digit month/day and a 4-digit year
///   (or a signed longer one).
///
/// `now` is rejected here (it needs the clock): use `parse_timestamp_at`.
/// Deviations: named region zones (`Europe/Paris`, `PST`) are not supported,
/// and impossible days (Feb 30) are rejected where java.time's SMART resolver
/// would clamp them to the month's last day.
pub fn parse_timestamp(s: &str) -> Result<i64, ValueError> {
    if is_raw_integer(s) {
        return s
            .parse::<i64>()
            .map_err(|_| ValueError::marshal(format!("Unable to make long (for date) from: '{s}'")));
    }
    parse_datetime(s).ok_or_else(|| ValueError::marshal(format!("Unable to parse a date/time from '{s}'")))
}

/// `parse_timestamp`, with `now` (any case) meaning `now_ms`.
pub fn parse_timestamp_at(s: &str, now_ms: i64) -> Result<i64, ValueError> {
    if s.eq_ignore_ascii_case("now") {
        return Ok(now_ms);
    }
    parse_timestamp(s)
}

fn parse_datetime(s: &str) -> Option<i64> {
    let mut sc = Scan::new(s);
    let sign: i8 = if sc.eat(b'+') {
        1
    } else if sc.eat(b'-') {
        -1
    } else {
        0
    };
    let (year, ylen) = sc.digits(1, 10)?;
    if !sc.eat(b'-') {
        return None;
    }
    let (month, mlen) = sc.digits(1, 19)?;
    if !sc.eat(b'-') {
        return None;
    }
    let (day, dlen) = sc.digits(1, 19)?;

    let has_time = match (sc.peek(), sc.peek_at(1)) {
        (Some(b'T'), _) => true,
        (Some(b' '), Some(c)) if c.is_ascii_digit() => true,
        _ => false,
    };
    let (mut hour, mut minute, mut second, mut millis) = (0u64, 0u64, 0u64, 0u64);
    if has_time {
        sc.i += 1;
        hour = sc.digits(1, 19)?.0;
        if !sc.eat(b':') {
            return None;
        }
        minute = sc.digits(1, 19)?.0;
        if sc.eat(b':') {
            second = sc.digits(1, 19)?.0;
        }
        if sc.eat(b'.') {
            let (frac, n) = sc.digits(0, 9)?;
            if sc.peek().is_some_and(|c| c.is_ascii_digit()) {
                return None;
            }
            // Scale the n-digit fraction to milliseconds, truncating.
            millis = if n >= 3 { frac / 10u64.pow((n - 3) as u32) } else { frac * 10u64.pow((3 - n) as u32) };
        }
    }
    let offset_minutes = parse_zone(&mut sc)?;
    if !sc.done() {
        return None;
    }

    // Year rules: a time-of-day form uses year-of-era (1+ digits, unsigned,
    // at least 1); date-only forms are ISO dates (4 digits unsigned, or a
    // signed year of more than 4 digits; `-` also allowed with 4 digits).
    if has_time {
        if sign != 0 || year == 0 {
            return None;
        }
    } else {
        let ok = match sign {
            0 => ylen == 4,
            1 => ylen > 4,
            _ => ylen >= 4,
        };
        if !ok || mlen != 2 || dlen != 2 {
            return None;
        }
    }
    if year > 999_999_999 {
        return None;
    }
    let year = if sign < 0 { -(year as i64) } else { year as i64 };
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return None;
    }
    let mut days = days_from_civil(year, month as u32, day as u32);
    if hour == 24 && minute == 0 && second == 0 && millis == 0 {
        hour = 0;
        days += 1;
    }
    if hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let total: i128 = i128::from(days) * i128::from(MILLIS_PER_DAY)
        + i128::from(hour) * 3_600_000
        + i128::from(minute) * 60_000
        + i128::from(second) * 1_000
        + i128::from(millis)
        - i128::from(offset_minutes) * 60_000;
    i64::try_from(total).ok()
}

/// An optional zone suffix; the offset in minutes (0 when absent).
fn parse_zone(sc: &mut Scan<'_>) -> Option<i64> {
    if sc.done() {
        return Some(0);
    }
    let spaced = sc.eat(b' ');
    match sc.peek()? {
        b'Z' if sc.peek_at(1).is_none() => {
            sc.i += 1;
            Some(0)
        }
        b'+' | b'-' => parse_numeric_offset(sc, true),
        c if spaced && c.is_ascii_alphabetic() => {
            let start = sc.i;
            while sc.peek().is_some_and(|c| c.is_ascii_alphabetic()) {
                sc.i += 1;
            }
            let name = std::str::from_utf8(sc.s.get(start..sc.i)?).ok()?.to_ascii_uppercase();
            if !matches!(name.as_str(), "UTC" | "GMT" | "UT" | "Z") {
                return None;
            }
            if sc.done() {
                return Some(0);
            }
            if name == "Z" {
                return None;
            }
            parse_numeric_offset(sc, false)
        }
        _ => None,
    }
}

/// `+hh`, `+hhmm`, `+hh:mm` (or, after a zone name, `+h` / `+h:mm` too).
fn parse_numeric_offset(sc: &mut Scan<'_>, two_digit_hours: bool) -> Option<i64> {
    let neg = match sc.peek()? {
        b'+' => false,
        b'-' => true,
        _ => return None,
    };
    sc.i += 1;
    let (h, hn) = sc.digits(1, 2)?;
    if two_digit_hours && hn != 2 {
        return None;
    }
    let mut m = 0;
    if sc.eat(b':') {
        let (v, n) = sc.digits(2, 2)?;
        if n != 2 {
            return None;
        }
        m = v;
    } else if sc.peek().is_some_and(|c| c.is_ascii_digit()) {
        m = sc.digits(2, 2)?.0;
    }
    if h > 18 || m > 59 || (h == 18 && m != 0) {
        return None;
    }
    let off = (h * 60 + m) as i64;
    Some(if neg { -off } else { off })
}

/// Formats milliseconds since the epoch as `yyyy-mm-ddTHH:MM:SS.sssZ` (UTC),
/// the format Cassandra uses for timestamp CQL literals. Years outside
/// 0..=9999 are written with more digits or a leading `-`.
pub fn format_timestamp(ms: i64) -> String {
    let days = ms.div_euclid(MILLIS_PER_DAY);
    let rem = ms.rem_euclid(MILLIS_PER_DAY);
    let (y, mo, d) = civil_from_days(days);
    let mut s = String::with_capacity(24);
    if y < 0 {
        let _ = write!(s, "-{:04}", y.unsigned_abs());
    } else {
        let _ = write!(s, "{y:04}");
    }
    let _ = write!(
        s,
        "-{mo:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3_600_000,
        rem / 60_000 % 60,
        rem / 1000 % 60,
        rem % 1000
    );
    s
}

// ---------------------------------------------------------------------------
// Dates.

/// Parses a date literal to its wire value (days with the epoch at 2^31), as
/// `SimpleDateSerializer.dateStringToDays`: an integer string is the raw
/// unsigned wire value (0..=2^32-1); otherwise an ISO local date
/// `yyyy-mm-dd` (signed years of more than 4 digits such as `+12345-01-01`
/// or `-0044-03-15`), which must fall within the representable range.
pub fn parse_date(s: &str) -> Result<u32, ValueError> {
    if is_raw_integer(s) {
        return s
            .parse::<i64>()
            .ok()
            .and_then(|v| u32::try_from(v).ok())
            .ok_or_else(|| ValueError::marshal(format!("Unable to make unsigned int (for date) from: '{s}'")));
    }
    let coerce = || ValueError::marshal(format!("Unable to coerce '{s}' to a formatted date (long)"));
    let days = parse_iso_local_date(s).ok_or_else(coerce)?;
    // Cassandra compares epoch milliseconds, which overflow for huge years.
    days.checked_mul(MILLIS_PER_DAY).ok_or_else(coerce)?;
    if days < i64::from(i32::MIN) {
        return Err(ValueError::marshal(format!(
            "Input date {s} is less than min supported date {}T00:00Z",
            iso_date_of_days(i64::from(i32::MIN))
        )));
    }
    if days > i64::from(i32::MAX) {
        return Err(ValueError::marshal(format!(
            "Input date {s} is greater than max supported date {}T00:00Z",
            iso_date_of_days(i64::from(i32::MAX))
        )));
    }
    Ok((days + i64::from(DATE_EPOCH)) as u32)
}

/// `DateTimeFormatter.ISO_LOCAL_DATE` with the STRICT resolver: days since 1970-01-01.
fn parse_iso_local_date(s: &str) -> Option<i64> {
    let mut sc = Scan::new(s);
    let sign: i8 = if sc.eat(b'+') {
        1
    } else if sc.eat(b'-') {
        -1
    } else {
        0
    };
    let (year, ylen) = sc.digits(4, 10)?;
    let ok = match sign {
        0 => ylen == 4,
        1 => ylen > 4,
        _ => true,
    };
    if !ok || !sc.eat(b'-') {
        return None;
    }
    let (month, _) = sc.digits(2, 2)?;
    if !sc.eat(b'-') {
        return None;
    }
    let (day, _) = sc.digits(2, 2)?;
    if !sc.done() || year > 999_999_999 {
        return None;
    }
    let year = if sign < 0 { -(year as i64) } else { year as i64 };
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return None;
    }
    Some(days_from_civil(year, month as u32, day as u32))
}

/// Formats a date wire value as an ISO local date (`2024-01-02`, `+12345-01-01`, `-0001-12-31`).
pub fn format_date(date: u32) -> String {
    iso_date_of_days(i64::from(date) - i64::from(DATE_EPOCH))
}

/// `toTimestamp(date)`: midnight UTC of the date, in milliseconds since the epoch.
pub fn date_to_timestamp(date: u32) -> i64 {
    (i64::from(date) - i64::from(DATE_EPOCH)) * MILLIS_PER_DAY
}

/// `toDate(timestamp)`, exactly as Cassandra's `SimpleDateSerializer.timeInMillisToDay`:
/// `Duration.ofMillis(ms).toDays()` — whole seconds are floored, days then
/// truncated toward zero, so instants in the last second before midnight of
/// a pre-1970 day land on the following day — and the result wraps to 32 bits.
pub fn timestamp_to_date(ms: i64) -> u32 {
    let days = ms.div_euclid(1000) / 86_400;
    (days as i32 as u32).wrapping_add(DATE_EPOCH)
}

// ---------------------------------------------------------------------------
// Times of day.

/// Parses a time literal to nanoseconds since midnight, as
/// `TimeSerializer.timeStringToLong`: an integer string is nanoseconds
/// (0..86400e9); otherwise `hh:mm:ss[.fffffffff]` (surrounding whitespace ignored).
pub fn parse_time(s: &str) -> Result<i64, ValueError> {
    if is_raw_integer(s) {
        return s
            .parse::<i64>()
            .ok()
            .filter(|v| (0..NANOS_PER_DAY).contains(v))
            .ok_or_else(|| ValueError::marshal(format!("Unable to make long (for time) from: '{s}'")));
    }
    parse_time_strictly(s.trim_matches(|c: char| c <= ' '))
        .ok_or_else(|| ValueError::marshal(format!("(TimeType) Unable to coerce '{s}' to a formatted time (long)")))
}

/// Java's `Integer.parseInt`.
fn java_parse_int(s: &str) -> Option<i64> {
    let body = s.strip_prefix(['+', '-']).unwrap_or(s);
    if body.is_empty() || !body.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let v: i64 = s.strip_prefix('+').unwrap_or(s).parse().ok()?;
    i32::try_from(v).ok().map(i64::from)
}

fn parse_time_strictly(s: &str) -> Option<i64> {
    let first = s.find(':')?;
    let second = first + 1 + s.get(first + 1..)?.find(':')?;
    if first == 0 || second + 1 >= s.len() {
        return None;
    }
    let hour = java_parse_int(s.get(..first)?)?;
    if !(0..24).contains(&hour) {
        return None;
    }
    let minute = java_parse_int(s.get(first + 1..second)?)?;
    if !(0..60).contains(&minute) {
        return None;
    }
    let after = s.get(second + 1..)?;
    let (sec, nanos) = match after.find('.') {
        Some(p) if p + 1 < after.len() => {
            let sec = java_parse_int(after.get(..p)?)?;
            let frac = after.get(p + 1..)?;
            if frac.len() > 9 || !frac.as_bytes().first()?.is_ascii_digit() {
                return None;
            }
            let padded = format!("{frac:0<9}");
            (sec, java_parse_int(&padded)?)
        }
        Some(_) => return None,
        None => (java_parse_int(after)?, 0),
    };
    if !(0..60).contains(&sec) {
        return None;
    }
    Some(hour * NANOS_PER_HOUR + minute * NANOS_PER_MINUTE + sec * NANOS_PER_SECOND + nanos)
}

/// Formats nanoseconds since midnight as `HH:MM:SS.nnnnnnnnn` (Cassandra's
/// `TimeSerializer.toString`). Out-of-range values are printed as plain numbers.
pub fn format_time(nanos: i64) -> String {
    if !(0..NANOS_PER_DAY).contains(&nanos) {
        return nanos.to_string();
    }
    format!(
        "{:02}:{:02}:{:02}.{:09}",
        nanos / NANOS_PER_HOUR,
        nanos / NANOS_PER_MINUTE % 60,
        nanos / NANOS_PER_SECOND % 60,
        nanos % NANOS_PER_SECOND
    )
}

// ---------------------------------------------------------------------------
// Durations.

/// Parses a duration literal as `org.apache.cassandra.cql3.Duration.from`,
/// returning `(months, days, nanoseconds)`. Formats, each with an optional
/// leading `-`:
/// - `1y2mo3w4d5h6m7s8ms9us10ns` (units case-insensitive, `µs` too, each unit
///   at most once and in this order);
/// - ISO 8601 `P1Y2M3DT4H5M6S` (any part optional) and `P2W`;
/// - ISO 8601 alternative `P0001-02-03T04:05:06`.
pub fn parse_duration(input: &str) -> Result<(i32, i32, i64), ValueError> {
    let neg = input.starts_with('-');
    let source = if neg { input.get(1..).unwrap_or_default() } else { input };
    let unable = || ValueError::invalid(format!("Unable to convert '{source}' to a duration"));
    let mut b = DurationBuilder::new(neg);
    if let Some(rest) = source.strip_prefix('P') {
        if source.ends_with('W') {
            let mut sc = Scan::new(rest);
            let (w, _) = sc.digits(1, usize::MAX).ok_or_else(unable)?;
            if !sc.eat(b'W') || !sc.done() {
                return Err(unable());
            }
            b.add(3, w)?;
        } else if source.contains('-') {
            let mut sc = Scan::new(rest);
            let mut parts = [0u64; 6];
            let widths = [4usize, 2, 2, 2, 2, 2];
            let seps = [b'-', b'-', b'T', b':', b':'];
            for (i, (part, w)) in parts.iter_mut().zip(widths).enumerate() {
                *part = sc.digits(w, w).ok_or_else(unable)?.0;
                if let Some(sep) = seps.get(i) {
                    if !sc.eat(*sep) {
                        return Err(unable());
                    }
                }
            }
            if !sc.done() {
                return Err(unable());
            }
            for (unit, v) in [1u8, 2, 4, 5, 6, 7].into_iter().zip(parts) {
                b.add(unit, v)?;
            }
        } else {
            let mut sc = Scan::new(rest);
            let mut items: Vec<(u8, u64)> = Vec::new();
            for (designator, unit) in [(b'Y', 1u8), (b'M', 2), (b'D', 4)] {
                if let Some(v) = iso_item(&mut sc, designator) {
                    items.push((unit, v.ok_or_else(unable)?));
                }
            }
            if sc.eat(b'T') {
                for (designator, unit) in [(b'H', 5u8), (b'M', 6), (b'S', 7)] {
                    if let Some(v) = iso_item(&mut sc, designator) {
                        items.push((unit, v.ok_or_else(unable)?));
                    }
                }
            }
            if !sc.done() {
                return Err(unable());
            }
            for (unit, v) in items {
                b.add(unit, v)?;
            }
        }
    } else {
        let mut sc = Scan::new(source);
        if sc.done() {
            return Err(unable());
        }
        while !sc.done() {
            let (v, _) = sc.digits(1, usize::MAX).ok_or_else(unable)?;
            let unit = standard_unit(&mut sc).ok_or_else(unable)?;
            b.add(unit, v)?;
        }
    }
    Ok(b.build())
}

/// `(\d+)X` at the cursor: `None` if absent (cursor unchanged), `Some(None)` on overflow.
fn iso_item(sc: &mut Scan<'_>, designator: u8) -> Option<Option<u64>> {
    let save = sc.i;
    let mut probe = Scan { s: sc.s, i: sc.i };
    while probe.peek().is_some_and(|c| c.is_ascii_digit()) {
        probe.i += 1;
    }
    if probe.i == save || probe.peek() != Some(designator) {
        return None;
    }
    let v = sc.digits(1, usize::MAX).map(|(v, _)| v);
    if v.is_none() {
        return Some(None);
    }
    sc.i = probe.i + 1;
    Some(v)
}

/// The unit index (years=1 .. nanoseconds=10) of a standard-format unit symbol.
fn standard_unit(sc: &mut Scan<'_>) -> Option<u8> {
    let lower = |k: usize| sc.peek_at(k).map(|c| c.to_ascii_lowercase());
    let (unit, len) = match (lower(0)?, lower(1)) {
        (b'y', _) => (1, 1),
        (b'm', Some(b'o')) => (2, 2),
        (b'w', _) => (3, 1),
        (b'd', _) => (4, 1),
        (b'h', _) => (5, 1),
        (b's', _) => (7, 1),
        (b'm', Some(b's')) => (8, 2),
        (b'u', Some(b's')) => (9, 2),
        (b'n', Some(b's')) => (10, 2),
        (b'm', _) => (6, 1),
        // µ is two bytes in UTF-8 (C2 B5).
        (0xc2, Some(0xb5)) if matches!(sc.peek_at(2), Some(b's' | b'S')) => (9, 3),
        _ => return None,
    };
    sc.i += len;
    Some(unit)
}

struct DurationBuilder {
    neg: bool,
    months: i32,
    days: i32,
    nanos: i64,
    current: u8,
}

fn unit_name(unit: u8) -> &'static str {
    match unit {
        1 => "years",
        2 => "months",
        3 => "weeks",
        4 => "days",
        5 => "hours",
        6 => "minutes",
        7 => "seconds",
        8 => "milliseconds",
        9 => "microseconds",
        _ => "nanoseconds",
    }
}

impl DurationBuilder {
    fn new(neg: bool) -> Self {
        DurationBuilder { neg, months: 0, days: 0, nanos: 0, current: 0 }
    }

    fn add(&mut self, unit: u8, units: u64) -> Result<(), ValueError> {
        if unit == self.current {
            return Err(ValueError::invalid(format!(
                "Invalid duration. The {} are specified multiple times",
                unit_name(unit)
            )));
        }
        if unit < self.current {
            return Err(ValueError::invalid(format!(
                "Invalid duration. The {} should be after {}",
                unit_name(self.current),
                unit_name(unit)
            )));
        }
        self.current = unit;
        let limit_err = |name: &str| {
            ValueError::invalid(format!(
                "Invalid duration. The total number of {name} must be less or equal to {}",
                i32::MAX
            ))
        };
        match unit {
            1 | 2 => {
                let per = if unit == 1 { 12 } else { 1 };
                let limit = (i64::from(i32::MAX) - i64::from(self.months)) / per;
                if units > limit as u64 {
                    return Err(limit_err("months"));
                }
                self.months += (units as i64 * per) as i32;
            }
            3 | 4 => {
                let per = if unit == 3 { 7 } else { 1 };
                let limit = (i64::from(i32::MAX) - i64::from(self.days)) / per;
                if units > limit as u64 {
                    return Err(limit_err("days"));
                }
                self.days += (units as i64 * per) as i32;
            }
            _ => {
                let per = match unit {
                    5 => NANOS_PER_HOUR,
                    6 => NANOS_PER_MINUTE,
                    7 => NANOS_PER_SECOND,
                    8 => NANOS_PER_MILLI,
                    9 => NANOS_PER_MICRO,
                    _ => 1,
                };
                let limit = (i64::MAX - self.nanos) / per;
                if units > limit as u64 {
                    return Err(limit_err("nanoseconds"));
                }
                self.nanos += units as i64 * per;
            }
        }
        Ok(())
    }

    fn build(self) -> (i32, i32, i64) {
        if self.neg {
            (-self.months, -self.days, -self.nanos)
        } else {
            (self.months, self.days, self.nanos)
        }
    }
}

/// Formats a duration as Cassandra's `Duration.toString` (`1y2mo3d4h5m6s7ms8us9ns`,
/// leading `-` if negative), except that a zero duration is `0s` so the
/// result is always a valid duration literal.
pub fn format_duration(months: i32, days: i32, nanos: i64) -> String {
    let mut s = String::new();
    if months < 0 || days < 0 || nanos < 0 {
        s.push('-');
    }
    let mut append = |dividend: u64, divisor: u64, unit: &str| -> u64 {
        if dividend == 0 || dividend < divisor {
            return dividend;
        }
        let _ = write!(s, "{}{unit}", dividend / divisor);
        dividend % divisor
    };
    let rem = append(u64::from(months.unsigned_abs()), 12, "y");
    append(rem, 1, "mo");
    append(u64::from(days.unsigned_abs()), 1, "d");
    if nanos != 0 {
        let mut rem = nanos.unsigned_abs();
        for (div, unit) in [
            (NANOS_PER_HOUR, "h"),
            (NANOS_PER_MINUTE, "m"),
            (NANOS_PER_SECOND, "s"),
            (NANOS_PER_MILLI, "ms"),
            (NANOS_PER_MICRO, "us"),
            (1, "ns"),
        ] {
            rem = append(rem, div as u64, unit);
        }
    }
    if s.is_empty() || s == "-" {
        return "0s".to_string();
    }
    s
}

// ---------------------------------------------------------------------------
// Inet and UUID.

/// Parses an IP address literal (dotted IPv4 or IPv6). As in Java's
/// `InetAddress.getByName`, an IPv4-mapped IPv6 address (`::ffff:1.2.3.4`)
/// yields the IPv4 address. Host names are not resolved (Shoal does no I/O).
pub fn parse_inet(s: &str) -> Result<IpAddr, ValueError> {
    let inner = s.strip_prefix('[').and_then(|r| r.strip_suffix(']')).unwrap_or(s);
    match inner.parse::<IpAddr>() {
        Ok(IpAddr::V6(v6)) => match v6.to_ipv4_mapped() {
            Some(v4) => Ok(IpAddr::V4(v4)),
            None => Ok(IpAddr::V6(v6)),
        },
        Ok(v4) => Ok(v4),
        Err(_) => Err(ValueError::marshal(format!("Unable to make inet address from '{s}'"))),
    }
}

fn is_uuid_shape(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        })
}

/// Parses a UUID in the 8-4-4-4-12 hexadecimal form (any case).
pub fn parse_uuid(s: &str) -> Result<Uuid, ValueError> {
    if !is_uuid_shape(s) {
        return Err(ValueError::marshal(format!("Unable to make UUID from '{s}'")));
    }
    Uuid::parse_str(s).map_err(|_| ValueError::marshal(format!("Unable to make UUID from '{s}'")))
}

/// Parses a time-based (version 1) UUID in the 8-4-4-4-12 form.
pub fn parse_timeuuid(s: &str) -> Result<Uuid, ValueError> {
    if !is_uuid_shape(s) {
        return Err(ValueError::marshal(format!("Unknown timeuuid representation: {s}")));
    }
    let u = parse_uuid(s)?;
    if u.get_version_num() != 1 {
        return Err(ValueError::marshal("TimeUUID supports only version 1 UUIDs"));
    }
    Ok(u)
}

// ---------------------------------------------------------------------------
// Time UUIDs.

fn raw_timestamp_to_msb(raw: i64) -> u64 {
    let r = (raw as u64) & 0x0FFF_FFFF_FFFF_FFFF;
    0x1000 | (r >> 48) | ((r & 0xFFFF_0000_0000) >> 16) | (r << 32)
}

fn msb_to_raw_timestamp(msb: u64) -> i64 {
    let m = msb & !0xF000;
    (((m & 0xFFFF) << 48) | ((m & 0xFFFF_0000) << 16) | (m >> 32)) as i64
}

fn unix_millis_to_raw(unix_ms: i64) -> i64 {
    unix_ms.wrapping_mul(10_000).wrapping_sub(UUID_EPOCH_UNIX_MILLIS * 10_000)
}

/// A version-1 UUID for the given Unix millisecond and lsb (clock sequence,
/// variant and node), as `TimeUUID.Generator.atUnixMillis`.
pub fn timeuuid_from_parts(unix_ms: i64, clock_seq_and_node: u64) -> Uuid {
    Uuid::from_u64_pair(raw_timestamp_to_msb(unix_millis_to_raw(unix_ms)), clock_seq_and_node)
}

/// A version-1 UUID for the given Unix microsecond and lsb, as
/// `TimeUUID.atUnixMicrosWithLsb` (what `now()` uses, with increasing micros).
pub fn timeuuid_from_unix_micros(unix_micros: i64, clock_seq_and_node: u64) -> Uuid {
    let raw = unix_micros.wrapping_mul(10).wrapping_sub(UUID_EPOCH_UNIX_MILLIS * 10_000);
    Uuid::from_u64_pair(raw_timestamp_to_msb(raw), clock_seq_and_node)
}

/// An RFC 4122 lsb for time UUIDs: variant bits `10`, 14-bit clock sequence, 48-bit node.
pub fn clock_seq_and_node(clock_seq: u16, node: u64) -> u64 {
    0x8000_0000_0000_0000 | (u64::from(clock_seq & 0x3FFF) << 48) | (node & 0xFFFF_FFFF_FFFF)
}

/// Unix microseconds of a version-1 UUID (`None` for other versions).
pub fn timeuuid_unix_micros(u: &Uuid) -> Option<i64> {
    if u.get_version_num() != 1 {
        return None;
    }
    let (msb, _) = u.as_u64_pair();
    Some(msb_to_raw_timestamp(msb) / 10 + UUID_EPOCH_UNIX_MILLIS * 1000)
}

/// Unix milliseconds of a version-1 UUID, as `TimeUUID.unix(MILLISECONDS)`
/// (microseconds divided by 1000, truncating). `None` for other versions.
pub fn timeuuid_unix_ms(u: &Uuid) -> Option<i64> {
    timeuuid_unix_micros(u).map(|us| us / 1000)
}

/// `minTimeuuid(ms)`: the smallest time UUID at that millisecond
/// (`TimeUUID.minAtUnixMillis`).
pub fn min_timeuuid(unix_ms: i64) -> Uuid {
    Uuid::from_u64_pair(raw_timestamp_to_msb(unix_millis_to_raw(unix_ms)), MIN_CLOCK_SEQ_AND_NODE)
}

/// `maxTimeuuid(ms)`: the largest time UUID at that millisecond
/// (`TimeUUID.maxAtUnixMillis`).
pub fn max_timeuuid(unix_ms: i64) -> Uuid {
    let raw = unix_millis_to_raw(unix_ms.wrapping_add(1)).wrapping_sub(1);
    Uuid::from_u64_pair(raw_timestamp_to_msb(raw), MAX_CLOCK_SEQ_AND_NODE)
}

/// `toDate(timeuuid)`.
pub fn timeuuid_to_date(u: &Uuid) -> Option<u32> {
    timeuuid_unix_ms(u).map(timestamp_to_date)
}

// ---------------------------------------------------------------------------
// Values from string constants, and values as CQL literals.

impl Value {
    /// The value a quoted string constant denotes for a column of type `ty`,
    /// for the types where Cassandra accepts one (`Constants.Type.STRING`:
    /// `ascii`, `text`, `inet`, `date`, `time`, `timestamp`). `now_ms`
    /// resolves `'now'` for timestamps. An empty string for `inet` is
    /// `ValueError::Empty` (Cassandra binds the empty value).
    pub fn from_string_literal(ty: &CqlType, s: &str, now_ms: i64) -> Result<Value, ValueError> {
        match ty {
            CqlType::Text => Ok(Value::Text(s.to_string())),
            CqlType::Ascii => match s.bytes().find(|b| *b > 127) {
                Some(b) => Err(ValueError::marshal(format!("Invalid byte for ascii: {}", b as i8))),
                None => Ok(Value::Ascii(s.to_string())),
            },
            CqlType::Inet if s.is_empty() => Err(ValueError::Empty(ty.to_cql())),
            CqlType::Inet => parse_inet(s).map(Value::Inet),
            CqlType::Date => parse_date(s).map(Value::Date),
            CqlType::Time => parse_time(s).map(Value::Time),
            CqlType::Timestamp => parse_timestamp_at(s, now_ms).map(Value::Timestamp),
            _ => Err(ValueError::invalid(format!("Invalid STRING constant ({s}) for type {}", ty.to_cql()))),
        }
    }

    /// The value as a CQL literal that parses back to the same value.
    /// UDTs print as tuple literals here; use `to_cql_literal_typed` to get
    /// `{field: value}` syntax.
    pub fn to_cql_literal(&self) -> String {
        let mut out = String::new();
        write_literal(self, None, &mut out);
        out
    }

    /// As `to_cql_literal`, using `ty` for UDT field names (at any depth).
    pub fn to_cql_literal_typed(&self, ty: &CqlType) -> String {
        let mut out = String::new();
        write_literal(self, Some(ty), &mut out);
        out
    }
}

fn quote_string(s: &str, out: &mut String) {
    out.push('\'');
    for c in s.chars() {
        if c == '\'' {
            out.push('\'');
        }
        out.push(c);
    }
    out.push('\'');
}

fn quote_identifier(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        if c == '"' {
            out.push('"');
        }
        out.push(c);
    }
    out.push('"');
}

fn write_float_literal(v: f64, debug_repr: String, out: &mut String) {
    if v.is_nan() {
        out.push_str("NaN");
    } else if v.is_infinite() {
        out.push_str(if v > 0.0 { "Infinity" } else { "-Infinity" });
    } else {
        out.push_str(&debug_repr);
    }
}

fn write_decimal_literal(unscaled: &num_bigint::BigInt, scale: i32, out: &mut String) {
    let digits = unscaled.magnitude().to_str_radix(10);
    if unscaled.sign() == Sign::Minus {
        out.push('-');
    }
    if (0..=64).contains(&scale) {
        let scale = scale as usize;
        if scale == 0 {
            out.push_str(&digits);
        } else {
            let padded = format!("{digits:0>width$}", width = scale + 1);
            let (int_part, frac_part) = padded.split_at(padded.len() - scale);
            let _ = write!(out, "{int_part}.{frac_part}");
        }
    } else {
        let exp = -i64::from(scale);
        let _ = write!(out, "{digits}E{}{}", if exp >= 0 { "+" } else { "-" }, exp.unsigned_abs());
    }
}

fn elem_type(ty: Option<&CqlType>) -> Option<&CqlType> {
    match ty {
        Some(CqlType::List { elem, .. } | CqlType::Set { elem, .. }) => Some(elem),
        _ => None,
    }
}

fn write_literal(v: &Value, ty: Option<&CqlType>, out: &mut String) {
    match v {
        Value::Ascii(s) | Value::Text(s) => quote_string(s, out),
        Value::Blob(b) => {
            out.push_str("0x");
            out.push_str(&crate::codec::hex(b));
        }
        Value::Boolean(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::TinyInt(x) => out.push_str(&x.to_string()),
        Value::SmallInt(x) => out.push_str(&x.to_string()),
        Value::Int(x) => out.push_str(&x.to_string()),
        Value::BigInt(x) | Value::Counter(x) => out.push_str(&x.to_string()),
        Value::Varint(x) => out.push_str(&x.to_string()),
        Value::Float(x) => write_float_literal(f64::from(*x), format!("{x:?}"), out),
        Value::Double(x) => write_float_literal(*x, format!("{x:?}"), out),
        Value::Decimal { unscaled, scale } => write_decimal_literal(unscaled, *scale, out),
        Value::Uuid(u) | Value::TimeUuid(u) => out.push_str(&u.hyphenated().to_string()),
        Value::Timestamp(ms) => {
            let (y, _, _) = civil_from_days(ms.div_euclid(MILLIS_PER_DAY));
            if (1..=9999).contains(&y) {
                quote_string(&format_timestamp(*ms), out);
            } else {
                out.push_str(&ms.to_string());
            }
        }
        Value::Date(d) => quote_string(&format_date(*d), out),
        Value::Time(t) => {
            if (0..NANOS_PER_DAY).contains(t) {
                quote_string(&format_time(*t), out);
            } else {
                out.push_str(&t.to_string());
            }
        }
        Value::Duration { months, days, nanos } => out.push_str(&format_duration(*months, *days, *nanos)),
        Value::Inet(a) => quote_string(&a.to_string(), out),
        Value::List(items) => {
            out.push('[');
            for (i, it) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_literal(it, elem_type(ty), out);
            }
            out.push(']');
        }
        Value::Set(items) => {
            out.push('{');
            for (i, it) in crate::codec::sorted_set(items.iter()).into_iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_literal(it, elem_type(ty), out);
            }
            out.push('}');
        }
        Value::Map(entries) => {
            let (kt, vt) = match ty {
                Some(CqlType::Map { key, value, .. }) => (Some(&**key), Some(&**value)),
                _ => (None, None),
            };
            out.push('{');
            for (i, (k, val)) in crate::codec::sorted_map(entries.iter().map(|(k, v)| (k, v))).into_iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_literal(k, kt, out);
                out.push_str(": ");
                write_literal(val, vt, out);
            }
            out.push('}');
        }
        Value::Tuple(fields) => {
            let types = match ty {
                Some(CqlType::Tuple(ts)) => Some(ts),
                _ => None,
            };
            out.push('(');
            for (i, f) in fields.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                match f {
                    None => out.push_str("null"),
                    Some(x) => write_literal(x, types.and_then(|ts| ts.get(i)), out),
                }
            }
            out.push(')');
        }
        Value::Udt(fields) => match ty {
            Some(CqlType::Udt { fields: defs, .. }) if fields.len() <= defs.len() => {
                out.push('{');
                for (i, (f, (name, fty))) in fields.iter().zip(defs.iter()).enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    quote_identifier(name, out);
                    out.push_str(": ");
                    match f {
                        None => out.push_str("null"),
                        Some(x) => write_literal(x, Some(fty), out),
                    }
                }
                out.push('}');
            }
            _ => {
                out.push('(');
                for (i, f) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    match f {
                        None => out.push_str("null"),
                        Some(x) => write_literal(x, None, out),
                    }
                }
                out.push(')');
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use num_bigint::BigInt;

    const T: i64 = 1_296_705_900_000; // 2011-02-03T04:05:00Z

    #[test]
    fn timestamps_in_cassandra_documented_formats() {
        for s in [
            "2011-02-03 04:05+0000",
            "2011-02-03 04:05:00+0000",
            "2011-02-03 04:05:00.000+0000",
            "2011-02-03T04:05+0000",
            "2011-02-03T04:05:00+0000",
            "2011-02-03T04:05:00.000+0000",
            "2011-02-03 04:05",
            "2011-02-03 04:05:00",
            "2011-02-03T04:05:00Z",
            "2011-02-03T04:05:00.000Z",
            "2011-02-03 04:05 +00:00",
            "2011-02-03 04:05:00 +0000",
            "2011-02-03 04:05 UTC",
            "2011-02-03 04:05:00 GMT",
            "2011-2-3 4:5",
            "2011-02-03T04:05+00",
            "2011-02-03 03:05-01:00",
            "2011-02-03 04:05:00 GMT+00:00",
            "1296705900000",
        ] {
            assert_eq!(parse_timestamp(s), Ok(T), "{s}");
        }
        assert_eq!(parse_timestamp("2011-02-03"), Ok(1_296_691_200_000));
        assert_eq!(parse_timestamp("2011-02-03+0000"), Ok(1_296_691_200_000));
        assert_eq!(parse_timestamp("2011-02-03Z"), Ok(1_296_691_200_000));
        assert_eq!(parse_timestamp("2011-02-03 +0000"), Ok(1_296_691_200_000));
        assert_eq!(parse_timestamp("2011-02-03 04:05:00.123"), Ok(T + 123));
        assert_eq!(parse_timestamp("2011-02-03 04:05:00.5"), Ok(T + 500));
        assert_eq!(parse_timestamp("2011-02-03 04:05:00.123456789Z"), Ok(T + 123));
        assert_eq!(parse_timestamp("2011-02-03 04:05-0800"), Ok(1_296_734_700_000));
        assert_eq!(parse_timestamp("2011-02-03 04:05+05:30"), Ok(1_296_686_100_000));
        assert_eq!(parse_timestamp("2011-02-03 24:00"), Ok(1_296_691_200_000 + MILLIS_PER_DAY));
        assert_eq!(parse_timestamp("-1"), Ok(-1));
        assert_eq!(parse_timestamp("1970-01-01"), Ok(0));
        assert_eq!(parse_timestamp("1969-12-31 23:59:59.999"), Ok(-1));
        assert_eq!(parse_timestamp_at("now", 42), Ok(42));
        assert_eq!(parse_timestamp_at("NOW", 42), Ok(42));
        for bad in [
            "now",
            "",
            "2011-02-30",
            "2011-13-01",
            "2011-02-03 25:00",
            "2011-02-03 04:60",
            "2011-02-03T",
            "11-02-03",
            "2011-02-03 04:05:00.1234567890",
            "2011-02-03 04:05 Mars/Olympus",
            "99999999999999999999",
            "abc",
        ] {
            assert!(parse_timestamp(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_timestamp("abc").unwrap_err().to_string(), "Unable to parse a date/time from 'abc'");
        assert_eq!(
            parse_timestamp("99999999999999999999").unwrap_err().to_string(),
            "Unable to make long (for date) from: '99999999999999999999'"
        );
    }

    #[test]
    fn format_timestamp_round_trips() {
        assert_eq!(format_timestamp(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(format_timestamp(T + 123), "2011-02-03T04:05:00.123Z");
        assert_eq!(format_timestamp(-1), "1969-12-31T23:59:59.999Z");
        assert_eq!(format_timestamp(1_704_164_645_006), "2024-01-02T03:04:05.006Z");
        for ms in [0, 1, -1, T, -62_135_596_800_000, 253_402_300_799_999, 1_704_164_645_006] {
            assert_eq!(parse_timestamp(&format_timestamp(ms)), Ok(ms), "{ms}");
        }
    }

    #[test]
    fn dates() {
        assert_eq!(parse_date("1970-01-01"), Ok(DATE_EPOCH));
        assert_eq!(parse_date("2011-02-03"), Ok(DATE_EPOCH + 15008));
        assert_eq!(parse_date("0001-01-01"), Ok(DATE_EPOCH - 719_162));
        assert_eq!(parse_date("2147483648"), Ok(DATE_EPOCH));
        assert_eq!(parse_date("0"), Ok(0));
        assert_eq!(parse_date("4294967295"), Ok(u32::MAX));
        assert!(parse_date("4294967296").is_err());
        assert_eq!(parse_date("-1").unwrap_err().to_string(), "Unable to make unsigned int (for date) from: '-1'");
        assert_eq!(parse_date("2000-02-29"), Ok(DATE_EPOCH + 11_016));
        assert_eq!(
            parse_date("2001-02-29").unwrap_err().to_string(),
            "Unable to coerce '2001-02-29' to a formatted date (long)"
        );
        assert!(parse_date("2011-2-3").is_err());
        assert!(parse_date("12345-01-01").is_err());
        assert!(parse_date("+2011-01-01").is_err());
        // Large and negative years.
        let big = parse_date("+12345-06-07").unwrap();
        assert_eq!(format_date(big), "+12345-06-07");
        let neg = parse_date("-0044-03-15").unwrap();
        assert_eq!(format_date(neg), "-0044-03-15");
        assert_eq!(format_date(0), "-5877641-06-23");
        assert_eq!(format_date(u32::MAX), "+5881580-07-11");
        assert_eq!(parse_date("-5877641-06-23"), Ok(0));
        assert_eq!(parse_date("+5881580-07-11"), Ok(u32::MAX));
        assert_eq!(
            parse_date("+5881580-07-12").unwrap_err().to_string(),
            "Input date +5881580-07-12 is greater than max supported date +5881580-07-11T00:00Z"
        );
        assert_eq!(
            parse_date("-5877641-06-22").unwrap_err().to_string(),
            "Input date -5877641-06-22 is less than min supported date -5877641-06-23T00:00Z"
        );
        for d in [0u32, 1, DATE_EPOCH - 1, DATE_EPOCH, DATE_EPOCH + 1, 123_456_789, u32::MAX - 1, u32::MAX] {
            assert_eq!(parse_date(&format_date(d)), Ok(d), "{d}");
        }
    }

    #[test]
    fn date_timestamp_conversions() {
        let d = parse_date("2011-02-03").unwrap();
        assert_eq!(date_to_timestamp(d), 1_296_691_200_000);
        assert_eq!(timestamp_to_date(T), d);
        assert_eq!(timestamp_to_date(1_296_691_200_000), d);
        assert_eq!(timestamp_to_date(1_296_691_200_000 - 1), d - 1);
        assert_eq!(timestamp_to_date(0), DATE_EPOCH);
        assert_eq!(date_to_timestamp(DATE_EPOCH), 0);
        // Cassandra's truncation quirk before 1970: the last second of a day maps to the next day.
        assert_eq!(timestamp_to_date(-1), DATE_EPOCH);
        assert_eq!(timestamp_to_date(-1000), DATE_EPOCH);
        assert_eq!(timestamp_to_date(-1001), DATE_EPOCH);
        assert_eq!(timestamp_to_date(-MILLIS_PER_DAY), DATE_EPOCH - 1);
        assert_eq!(date_to_timestamp(DATE_EPOCH - 1), -MILLIS_PER_DAY);
        // toUnixTimestamp(toDate(...)) is midnight.
        assert_eq!(date_to_timestamp(timestamp_to_date(T)), 1_296_691_200_000);
    }

    #[test]
    fn times() {
        let hms = |h: i64, m: i64, s: i64| h * NANOS_PER_HOUR + m * NANOS_PER_MINUTE + s * NANOS_PER_SECOND;
        assert_eq!(parse_time("08:12:54"), Ok(hms(8, 12, 54)));
        assert_eq!(parse_time("08:12:54.123"), Ok(hms(8, 12, 54) + 123_000_000));
        assert_eq!(parse_time("08:12:54.123456"), Ok(hms(8, 12, 54) + 123_456_000));
        assert_eq!(parse_time("08:12:54.123456789"), Ok(hms(8, 12, 54) + 123_456_789));
        assert_eq!(parse_time(" 8:2:4 "), Ok(hms(8, 2, 4)));
        assert_eq!(parse_time("0"), Ok(0));
        assert_eq!(parse_time("86399999999999"), Ok(NANOS_PER_DAY - 1));
        assert_eq!(
            parse_time("86400000000000").unwrap_err().to_string(),
            "Unable to make long (for time) from: '86400000000000'"
        );
        for bad in ["24:00:00", "08:60:00", "08:00:60", "08:12:54.1234567890", "08:12", "08:12:", "08:12:54.", "a:b:c"]
        {
            assert!(parse_time(bad).is_err(), "{bad}");
        }
        assert_eq!(
            parse_time("08:12").unwrap_err().to_string(),
            "(TimeType) Unable to coerce '08:12' to a formatted time (long)"
        );
        assert_eq!(format_time(hms(8, 12, 54) + 123_456_789), "08:12:54.123456789");
        assert_eq!(format_time(0), "00:00:00.000000000");
    }

    #[test]
    fn durations() {
        let h = NANOS_PER_HOUR;
        let m = NANOS_PER_MINUTE;
        let s = NANOS_PER_SECOND;
        assert_eq!(parse_duration("1h30m"), Ok((0, 0, h + 30 * m)));
        assert_eq!(parse_duration("12h30m"), Ok((0, 0, 12 * h + 30 * m)));
        assert_eq!(
            parse_duration("1y2mo3w4d5h6m7s8ms9us10ns"),
            Ok((14, 25, 5 * h + 6 * m + 7 * s + 8_000_000 + 9_000 + 10))
        );
        assert_eq!(parse_duration("1Y2MO3W4D5H6M7S8MS9US10NS"), parse_duration("1y2mo3w4d5h6m7s8ms9us10ns"));
        assert_eq!(parse_duration("-1h"), Ok((0, 0, -h)));
        assert_eq!(parse_duration("3µs"), Ok((0, 0, 3_000)));
        assert_eq!(parse_duration("3d"), Ok((0, 3, 0)));
        assert_eq!(parse_duration("P1Y2M3DT4H5M6S"), Ok((14, 3, 4 * h + 5 * m + 6 * s)));
        assert_eq!(parse_duration("-P1Y2M3DT4H5M6S"), Ok((-14, -3, -(4 * h + 5 * m + 6 * s))));
        assert_eq!(parse_duration("P1M"), Ok((1, 0, 0)));
        assert_eq!(parse_duration("PT1M"), Ok((0, 0, m)));
        assert_eq!(parse_duration("P2W"), Ok((0, 14, 0)));
        assert_eq!(parse_duration("P0001-02-03T04:05:06"), Ok((14, 3, 4 * h + 5 * m + 6 * s)));
        assert_eq!(parse_duration("P"), Ok((0, 0, 0)));
        assert_eq!(
            parse_duration("1h1h").unwrap_err().to_string(),
            "Invalid duration. The hours are specified multiple times"
        );
        assert_eq!(
            parse_duration("1m1h").unwrap_err().to_string(),
            "Invalid duration. The minutes should be after hours"
        );
        assert_eq!(parse_duration("1h30").unwrap_err().to_string(), "Unable to convert '1h30' to a duration");
        assert_eq!(parse_duration("-P1X").unwrap_err().to_string(), "Unable to convert 'P1X' to a duration");
        assert_eq!(
            parse_duration("2147483648mo").unwrap_err().to_string(),
            "Invalid duration. The total number of months must be less or equal to 2147483647"
        );
        assert!(parse_duration("").is_err());
        assert!(parse_duration("P1Y2Y").is_err());
        assert!(parse_duration("P001-02-03T04:05:06").is_err());
        assert!(matches!(parse_duration("1x"), Err(ValueError::InvalidRequest(_))));
        for (mo, d, n) in [(0, 0, 0), (14, 25, 5 * h + 7), (-1, -2, -3), (0, 0, 1), (i32::MAX, i32::MAX, i64::MAX)] {
            let text = format_duration(mo, d, n);
            assert_eq!(parse_duration(&text), Ok((mo, d, n)), "{text}");
        }
        assert_eq!(format_duration(0, 0, h + 30 * m), "1h30m");
        assert_eq!(format_duration(14, 3, 0), "1y2mo3d");
    }

    #[test]
    fn inets_and_uuids() {
        assert_eq!(parse_inet("1.2.3.4").unwrap().to_string(), "1.2.3.4");
        assert_eq!(parse_inet("::1").unwrap().to_string(), "::1");
        assert_eq!(parse_inet("::ffff:1.2.3.4").unwrap().to_string(), "1.2.3.4");
        assert_eq!(parse_inet("[fe80::1]").unwrap().to_string(), "fe80::1");
        assert_eq!(
            parse_inet("example.com").unwrap_err().to_string(),
            "Unable to make inet address from 'example.com'"
        );
        let u = "550e8400-e29b-41d4-a716-446655440000";
        assert_eq!(parse_uuid(u).unwrap().to_string(), u);
        assert_eq!(parse_uuid(&u.to_uppercase()).unwrap().to_string(), u);
        assert!(parse_uuid("550e8400e29b41d4a716446655440000").is_err());
        assert_eq!(parse_timeuuid(u).unwrap_err().to_string(), "TimeUUID supports only version 1 UUIDs");
        assert!(parse_timeuuid("13814000-1dd2-11b2-8080-808080808080").is_ok());
    }

    #[test]
    fn timeuuids() {
        let lsb = clock_seq_and_node(0x1234, 0xabcdef012345);
        let u = timeuuid_from_parts(0, lsb);
        assert_eq!(u.to_string(), "13814000-1dd2-11b2-9234-abcdef012345");
        assert_eq!(u.get_version_num(), 1);
        assert_eq!(timeuuid_unix_ms(&u), Some(0));
        let t = T + 123;
        assert_eq!(timeuuid_unix_ms(&timeuuid_from_parts(t, lsb)), Some(t));
        assert_eq!(timeuuid_unix_micros(&timeuuid_from_unix_micros(t * 1000 + 7, lsb)), Some(t * 1000 + 7));
        let min = min_timeuuid(t);
        let max = max_timeuuid(t);
        assert_eq!(min.as_u64_pair().1, MIN_CLOCK_SEQ_AND_NODE);
        assert_eq!(max.as_u64_pair().1, MAX_CLOCK_SEQ_AND_NODE);
        assert_eq!(timeuuid_unix_ms(&min), Some(t));
        assert_eq!(timeuuid_unix_ms(&max), Some(t));
        assert_eq!(timeuuid_unix_ms(&min_timeuuid(t + 1)), Some(t + 1));
        assert_eq!(timeuuid_to_date(&min), Some(parse_date("2011-02-03").unwrap()));
        assert_eq!(timeuuid_unix_ms(&Uuid::nil()), None);
        // Pre-1970 instants work too.
        assert_eq!(timeuuid_unix_ms(&timeuuid_from_parts(-1_000_000, lsb)), Some(-1_000_000));
    }

    #[test]
    fn literals() {
        let lit = |v: Value| v.to_cql_literal();
        assert_eq!(lit(Value::Text("it's".into())), "'it''s'");
        assert_eq!(lit(Value::Blob(vec![0xca, 0xfe])), "0xcafe");
        assert_eq!(lit(Value::Blob(vec![])), "0x");
        assert_eq!(lit(Value::Float(1.5)), "1.5");
        assert_eq!(lit(Value::Double(f64::NAN)), "NaN");
        assert_eq!(lit(Value::Double(f64::NEG_INFINITY)), "-Infinity");
        assert_eq!(lit(Value::Double(-0.0)), "-0.0");
        assert_eq!(lit(Value::Decimal { unscaled: BigInt::from(-12345), scale: 2 }), "-123.45");
        assert_eq!(lit(Value::Decimal { unscaled: BigInt::from(5), scale: 3 }), "0.005");
        assert_eq!(lit(Value::Decimal { unscaled: BigInt::from(5), scale: -3 }), "5E+3");
        assert_eq!(lit(Value::Decimal { unscaled: BigInt::from(5), scale: 100 }), "5E-100");
        assert_eq!(lit(Value::Timestamp(T)), "'2011-02-03T04:05:00.000Z'");
        assert_eq!(lit(Value::Timestamp(i64::MIN)), i64::MIN.to_string());
        assert_eq!(lit(Value::Date(DATE_EPOCH)), "'1970-01-01'");
        assert_eq!(lit(Value::Time(1)), "'00:00:00.000000001'");
        assert_eq!(lit(Value::Duration { months: 0, days: 0, nanos: NANOS_PER_HOUR + 2 * NANOS_PER_MINUTE }), "1h2m");
        assert_eq!(lit(Value::Inet("10.0.0.1".parse().unwrap())), "'10.0.0.1'");
        assert_eq!(lit(Value::List(vec![Value::Int(1), Value::Int(2)])), "[1, 2]");
        assert_eq!(lit(Value::Set(vec![Value::Int(2), Value::Int(1), Value::Int(2)])), "{1, 2}");
        assert_eq!(
            lit(Value::Map(vec![(Value::Text("b".into()), Value::Int(2)), (Value::Text("a".into()), Value::Int(1))])),
            "{'a': 1, 'b': 2}"
        );
        assert_eq!(lit(Value::Tuple(vec![Some(Value::Int(1)), None])), "(1, null)");
        let udt = CqlType::Udt {
            keyspace: "ks".into(),
            name: "addr".into(),
            fields: vec![("street".into(), CqlType::Text), ("Zip".into(), CqlType::Int)],
            frozen: true,
        };
        assert_eq!(
            Value::Udt(vec![Some(Value::Text("x".into())), None]).to_cql_literal_typed(&udt),
            "{\"street\": 'x', \"Zip\": null}"
        );
        // Literal text goes back through the parsers.
        assert_eq!(parse_timestamp("2011-02-03T04:05:00.000Z"), Ok(T));
    }

    #[test]
    fn string_constants() {
        assert_eq!(
            Value::from_string_literal(&CqlType::Timestamp, "2011-02-03 04:05+0000", 0),
            Ok(Value::Timestamp(T))
        );
        assert_eq!(Value::from_string_literal(&CqlType::Timestamp, "now", 7), Ok(Value::Timestamp(7)));
        assert_eq!(Value::from_string_literal(&CqlType::Date, "1970-01-01", 0), Ok(Value::Date(DATE_EPOCH)));
        assert!(Value::from_string_literal(&CqlType::Ascii, "é", 0).is_err());
        assert!(Value::from_string_literal(&CqlType::Int, "1", 0).is_err());
    }

    #[test]
    fn calendar_matches_known_points() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(days_from_civil(1, 1, 1), -719_162);
        for d in [-1_000_000_000i64, -719_162, -1, 0, 1, 11_016, 2_932_896, 1_000_000_000] {
            let (y, m, dd) = civil_from_days(d);
            assert_eq!(days_from_civil(y, m, dd), d);
        }
    }
}
