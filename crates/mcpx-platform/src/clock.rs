//! Times as people read them, in UTC: the CLI's and the dashboard's.

/// `secs` since the Unix epoch as `YYYY-MM-DD HH:MM UTC` (the proleptic Gregorian
/// calendar; days to a date by Howard Hinnant's `civil_from_days`).
pub fn utc(secs: u64) -> String {
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02} {:02}:{:02} UTC", rest / 3600, rest % 3600 / 60)
}

/// `HH:MM:SS` of `ms` (milliseconds since the Unix epoch), UTC.
pub fn time_of_day(ms: u64) -> String {
    let secs = ms / 1000;
    format!("{:02}:{:02}:{:02}", secs / 3600 % 24, secs / 60 % 60, secs % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_times_read_as_utc() {
        assert_eq!(utc(0), "1970-01-01 00:00 UTC");
        assert_eq!(utc(951_782_400 + 86_399), "2000-02-29 23:59 UTC");
        assert_eq!(utc(1_796_155_200 + 61), "2026-12-01 20:01 UTC");
        assert_eq!(time_of_day(3_723_000), "01:02:03");
    }
}
