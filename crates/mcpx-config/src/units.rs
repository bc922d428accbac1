//! Durations and byte sizes as written in config files.
//!
//! Durations: a string of one or more `<number><unit>` parts, units `ms`, `s`, `m`, `h`
//! (lowercase), e.g. `"500ms"`, `"30s"`, `"5m"`, `"1h"`, `"1h30m"`, `"1.5s"`; a string that is
//! a bare number (`"30"`) or a JSON number (`30`, `0.25`) is a number of seconds.
//!
//! Sizes: a string `<number><unit>` with units `B`, `KiB`, `MiB`, `GiB`, `TiB` (powers of 1024)
//! or `KB`, `MB`, `GB`, `TB` (powers of 1000), matched case-insensitively, e.g. `"512B"`,
//! `"64KiB"`, `"8MiB"`, `"1.5GB"`; a bare number string or a JSON integer is a number of bytes.
//! Fractional results are rounded down to whole bytes.

use std::time::Duration;

use serde_json::Value;

const NANOS_PER_SEC: u128 = 1_000_000_000;

/// The longest duration any setting or flag takes: 365 days. A longer one is refused, so
/// a deadline computed from one (`Instant::now() + d`) cannot overflow.
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

/// Parses a duration string such as `"500ms"`, `"30s"`, `"5m"`, `"1h"` or `"1h30m"`.
///
/// A bare number (`"30"`, `"0.5"`) is seconds. Whitespace around the whole string and between
/// parts is ignored. Errors: a message (lowercase, no trailing period) describing the problem,
/// e.g. for an unknown unit, a missing number, or a value over [`MAX_DURATION`].
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let s = text.trim();
    if s.is_empty() {
        return Err("empty duration".to_owned());
    }
    if is_plain_number(s) {
        let nanos = decimal_times(s, NANOS_PER_SEC).ok_or_else(|| "duration is too large".to_owned())?;
        return nanos_to_duration(nanos);
    }
    let mut total: u128 = 0;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let number = &rest[..num_len];
        if number.is_empty() || !is_plain_number(number) {
            return Err(format!("`{s}` is not a duration (write e.g. \"500ms\", \"30s\", \"5m\", \"1h\")"));
        }
        rest = &rest[num_len..];
        let unit_len = rest.find(|c: char| !c.is_ascii_alphabetic()).unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        let scale: u128 = match unit {
            "ms" => 1_000_000,
            "s" => NANOS_PER_SEC,
            "m" => 60 * NANOS_PER_SEC,
            "h" => 3600 * NANOS_PER_SEC,
            "" => {
                return Err(format!("`{s}` is missing a unit after `{number}` (use ms, s, m or h)"));
            }
            other => {
                return Err(format!("unknown duration unit `{other}` in `{s}` (use ms, s, m or h)"));
            }
        };
        rest = rest[unit_len..].trim_start();
        let part = decimal_times(number, scale).ok_or_else(|| "duration is too large".to_owned())?;
        total = total.checked_add(part).ok_or_else(|| "duration is too large".to_owned())?;
    }
    nanos_to_duration(total)
}

/// Parses a byte size string such as `"512B"`, `"64KiB"`, `"8MiB"`, `"1GiB"` or `"10MB"`.
///
/// `KiB`/`MiB`/`GiB`/`TiB` are powers of 1024, `KB`/`MB`/`GB`/`TB` powers of 1000, `B` or no
/// unit means bytes; units are case-insensitive. Returns the number of bytes (fractions rounded
/// down). Errors: a message describing an unknown unit, a malformed number or overflow of `u64`.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let s = text.trim();
    if s.is_empty() {
        return Err("empty size".to_owned());
    }
    let num_len = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let number = &s[..num_len];
    if number.is_empty() || !is_plain_number(number) {
        return Err(format!("`{s}` is not a size (write e.g. \"512B\", \"64KiB\", \"8MiB\", \"1GiB\")"));
    }
    let unit = s[num_len..].trim();
    let scale: u128 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        "tib" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        _ => {
            return Err(format!("unknown size unit `{unit}` in `{s}` (use B, KiB, MiB, GiB, KB, MB or GB)"));
        }
    };
    let bytes = decimal_times(number, scale).ok_or_else(|| "size is too large".to_owned())?;
    u64::try_from(bytes).map_err(|_| "size is too large".to_owned())
}

/// Converts a config value (a duration string or a JSON number of seconds) to a [`Duration`].
///
/// Errors: a message naming what was expected and what was found (the found value is shown,
/// durations are not secret).
pub fn duration_from_json(value: &Value) -> Result<Duration, String> {
    const EXPECTED: &str = "expected a duration like \"500ms\", \"30s\", \"5m\", \"1h\" or a number of seconds";
    match value {
        Value::String(s) => parse_duration(s).map_err(|e| format!("{e}; {EXPECTED}")),
        Value::Number(n) => {
            if let Some(secs) = n.as_u64() {
                Ok(Duration::from_secs(secs))
            } else if let Some(f) = n.as_f64() {
                if f < 0.0 {
                    return Err(format!("{EXPECTED}, found a negative number {n}"));
                }
                Duration::try_from_secs_f64(f).map_err(|_| format!("{EXPECTED}, found {n} (out of range)"))
            } else {
                Err(format!("{EXPECTED}, found {n}"))
            }
        }
        other => Err(format!("{EXPECTED}, found {}", json_kind(other))),
    }
}

/// Converts a config value (a size string or a JSON integer number of bytes) to bytes.
///
/// Errors: a message naming what was expected and what was found.
pub fn size_from_json(value: &Value) -> Result<u64, String> {
    const EXPECTED: &str = "expected a size like \"64KiB\", \"8MiB\", \"1GiB\" or a number of bytes";
    match value {
        Value::String(s) => parse_size(s).map_err(|e| format!("{e}; {EXPECTED}")),
        Value::Number(n) => {
            n.as_u64().ok_or_else(|| format!("{EXPECTED}, found {n} (bytes must be a whole non-negative number)"))
        }
        other => Err(format!("{EXPECTED}, found {}", json_kind(other))),
    }
}

/// Names the JSON type of `value` for error messages ("a string", "an array", ...), never its
/// contents.
pub(crate) fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// True for `123`, `1.5`, `.5`, `5.`: ASCII digits with at most one dot and at least one digit.
fn is_plain_number(s: &str) -> bool {
    let mut dots = 0;
    let mut digits = 0;
    for c in s.chars() {
        match c {
            '0'..='9' => digits += 1,
            '.' => dots += 1,
            _ => return false,
        }
    }
    digits > 0 && dots <= 1
}

/// Computes `number * scale` exactly for a decimal `number` (checked by [`is_plain_number`]),
/// rounding the fractional part down. `None` on overflow.
fn decimal_times(number: &str, scale: u128) -> Option<u128> {
    let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
    let int: u128 = if int_part.is_empty() { 0 } else { int_part.parse().ok()? };
    let mut total = int.checked_mul(scale)?;
    // Fraction digits beyond 30 cannot matter for any scale we use (≤ 2^40 or 3.6e12).
    let frac = &frac_part[..frac_part.len().min(30)];
    if !frac.is_empty() {
        let numerator: u128 = frac.parse().ok()?;
        let denominator = 10u128.checked_pow(u32::try_from(frac.len()).ok()?)?;
        total = total.checked_add(numerator.checked_mul(scale)? / denominator)?;
    }
    Some(total)
}

fn nanos_to_duration(nanos: u128) -> Result<Duration, String> {
    if nanos > MAX_DURATION.as_nanos() {
        return Err("the duration is over 365 days, the longest mcpx takes".to_owned());
    }
    let secs = u64::try_from(nanos / NANOS_PER_SEC).map_err(|_| "duration is too large".to_owned())?;
    // The remainder is < 1e9 so it fits in u32.
    let sub = u32::try_from(nanos % NANOS_PER_SEC).map_err(|_| "duration is too large".to_owned())?;
    Ok(Duration::new(secs, sub))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_over_a_year_are_refused() {
        assert_eq!(parse_duration("8760h"), Ok(MAX_DURATION));
        for long in ["8760h1s", "18446744073709551615s", "31536001"] {
            assert!(parse_duration(long).unwrap_err().contains("365 days"), "{long}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("1m 30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("0.1s"), Ok(Duration::from_millis(100)));
        assert_eq!(parse_duration("30"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert!(parse_duration("5 minutes").is_err());
        assert!(parse_duration("5d").unwrap_err().contains("unknown duration unit `d`"));
        assert!(parse_duration("").is_err());
        assert!(parse_duration("s").is_err());
        assert!(parse_duration("1.2.3s").is_err());
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("99999999999999999999999h").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("512B"), Ok(512));
        assert_eq!(parse_size("512"), Ok(512));
        assert_eq!(parse_size("64KiB"), Ok(64 * 1024));
        assert_eq!(parse_size("8MiB"), Ok(8 << 20));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("1gib"), Ok(1 << 30));
        assert_eq!(parse_size("10KB"), Ok(10_000));
        assert_eq!(parse_size("2MB"), Ok(2_000_000));
        assert_eq!(parse_size("1GB"), Ok(1_000_000_000));
        assert_eq!(parse_size("1.5KiB"), Ok(1536));
        assert_eq!(parse_size("8 MiB"), Ok(8 << 20));
        assert!(parse_size("8XB").unwrap_err().contains("unknown size unit `XB`"));
        assert!(parse_size("MiB").is_err());
        assert!(parse_size("99999999999TiB").is_err());
    }

    #[test]
    fn json_values() {
        use serde_json::json;
        assert_eq!(duration_from_json(&json!(2)), Ok(Duration::from_secs(2)));
        assert_eq!(duration_from_json(&json!(0.25)), Ok(Duration::from_millis(250)));
        assert_eq!(duration_from_json(&json!("5m")), Ok(Duration::from_secs(300)));
        assert!(duration_from_json(&json!(-1)).is_err());
        assert!(duration_from_json(&json!(true)).unwrap_err().ends_with("found a boolean"));
        assert_eq!(size_from_json(&json!(1024)), Ok(1024));
        assert_eq!(size_from_json(&json!("1KiB")), Ok(1024));
        assert!(size_from_json(&json!(1.5)).is_err());
        assert!(size_from_json(&json!(-3)).is_err());
    }
}
