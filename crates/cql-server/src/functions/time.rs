//! Calendar arithmetic for `timestamp ± duration` and the `floor` time
//! bucketing functions, in UTC as Cassandra computes them: months are added
//! first (the day of month clamped to the month's length), then days, then
//! the sub-day part in whole milliseconds.

use types::literal::{civil_from_days, days_from_civil};

const MILLIS_PER_DAY: i64 = 86_400_000;
const NANOS_PER_DAY: i64 = 86_400_000_000_000;

fn days_in_month(year: i64, month: u32) -> u32 {
    let next = if month == 12 { days_from_civil(year + 1, 1, 1) } else { days_from_civil(year, month + 1, 1) };
    (next - days_from_civil(year, month, 1)) as u32
}

/// `ms` plus `months` calendar months (the day clamped to the month's length).
fn add_months(ms: i64, months: i64) -> i64 {
    if months == 0 {
        return ms;
    }
    let (days, in_day) = (ms.div_euclid(MILLIS_PER_DAY), ms.rem_euclid(MILLIS_PER_DAY));
    let (year, month, day) = civil_from_days(days);
    let total = year * 12 + i64::from(month) - 1 + months;
    let (year, month) = (total.div_euclid(12), total.rem_euclid(12) as u32 + 1);
    let day = day.min(days_in_month(year, month));
    days_from_civil(year, month, day) * MILLIS_PER_DAY + in_day
}

/// `ms` plus a duration of `months`, `days` and `nanos` (each may be negative).
pub fn add_duration(ms: i64, months: i64, days: i64, nanos: i64) -> i64 {
    add_months(ms, months).wrapping_add(days.wrapping_mul(MILLIS_PER_DAY)).wrapping_add(nanos / 1_000_000)
}

fn check(negative: bool, start: i64, time: i64) -> Result<(), String> {
    if start > time {
        return Err("The floor function starting time is greater than the provided time".into());
    }
    if negative {
        return Err("Negative durations are not supported by the floor function".into());
    }
    Ok(())
}

/// `floor(time, duration, start)` on milliseconds: the start of the
/// duration-long bucket (counted from `start`) that holds `time`.
pub fn floor_timestamp(time: i64, months: i32, days: i32, nanos: i64, start: i64) -> Result<i64, String> {
    check(months < 0 || days < 0 || nanos < 0, start, time)?;
    let sub_month = i64::from(days) * MILLIS_PER_DAY + nanos / 1_000_000;
    if months == 0 {
        if sub_month <= 0 {
            return Ok(time);
        }
        return Ok(start + ((time - start) / sub_month) * sub_month);
    }
    let month_index = |ms: i64| {
        let (y, m, _) = civil_from_days(ms.div_euclid(MILLIS_PER_DAY));
        y * 12 + i64::from(m)
    };
    let months = i64::from(months);
    let mut multiplier = (month_index(time) - month_index(start)) / months;
    let mut calendar = add_months(start, multiplier * months);
    let mut floor = calendar + multiplier * sub_month;
    while floor > time && multiplier > 0 {
        multiplier -= 1;
        calendar = add_months(calendar, -months);
        floor = calendar + multiplier * sub_month;
    }
    Ok(start.max(floor))
}

/// `floor(date, duration, start)` on days since the epoch; the duration must be whole days.
pub fn floor_date(date: i64, months: i32, days: i32, nanos: i64, start: i64) -> Result<i64, String> {
    if nanos != 0 {
        return Err(format!(
            "The floor on date values cannot be computed for the {} duration as precision is below 1 day",
            types::literal::format_duration(months, days, nanos)
        ));
    }
    let ms = floor_timestamp(date * MILLIS_PER_DAY, months, days, 0, start * MILLIS_PER_DAY)?;
    Ok(ms.div_euclid(MILLIS_PER_DAY))
}

/// `floor(time, duration, start)` on nanoseconds of the day; the duration must be under a day.
pub fn floor_time(time: i64, months: i32, days: i32, nanos: i64, start: i64) -> Result<i64, String> {
    check(months < 0 || days < 0 || nanos < 0, start, time)?;
    if months != 0 || days != 0 || nanos >= NANOS_PER_DAY {
        return Err("For time values, the floor can only be computed for durations smaller that a day".into());
    }
    if nanos == 0 {
        return Ok(time);
    }
    Ok(start + ((time - start) / nanos) * nanos)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(s: &str) -> i64 {
        types::literal::parse_timestamp(s).expect("timestamp")
    }

    #[test]
    fn durations_add_months_then_days() {
        let t = ms("2024-01-31 10:00:00+0000");
        assert_eq!(add_duration(t, 1, 0, 0), ms("2024-02-29 10:00:00+0000"));
        assert_eq!(add_duration(t, -2, 0, 0), ms("2023-11-30 10:00:00+0000"));
        assert_eq!(add_duration(t, 0, 1, 3_600_000_000_000), ms("2024-02-01 11:00:00+0000"));
        assert_eq!(add_duration(t, 14, 0, 0), ms("2025-03-31 10:00:00+0000"));
    }

    #[test]
    fn floor_buckets_from_the_start() {
        let t = ms("2024-01-02 03:04:05.678+0000");
        let hour = 3_600_000_000_000;
        assert_eq!(floor_timestamp(t, 0, 0, hour, 0), Ok(ms("2024-01-02 03:00:00+0000")));
        assert_eq!(floor_timestamp(t, 1, 0, 0, 0), Ok(ms("2024-01-01 00:00:00+0000")));
        assert_eq!(floor_timestamp(t, 1, 1, 0, 0), Ok(ms("2023-12-19 00:00:00+0000")));
        let start = ms("2024-01-01 00:30:00+0000");
        assert_eq!(floor_timestamp(t, 0, 0, hour, start), Ok(ms("2024-01-02 02:30:00+0000")));
        assert_eq!(floor_timestamp(t, 0, 0, 0, 0), Ok(t));
        assert!(floor_timestamp(t, 0, 0, -hour, 0).is_err());
        assert!(floor_timestamp(t, 0, 0, hour, t + 1).is_err());
        // 2024-01-02 is day 19724; weeks count from Thursday 1970-01-01.
        assert_eq!(floor_date(19724, 0, 7, 0, 0), Ok(19719));
        assert_eq!(floor_date(19724, 1, 0, 0, 0), Ok(19723));
        assert!(floor_date(19724, 0, 0, hour, 0).is_err());
        assert_eq!(floor_time(11_045_123_456_789, 0, 0, 90_000_000_000, 0), Ok(10_980_000_000_000));
        assert!(floor_time(1, 0, 1, 0, 0).is_err());
    }
}
