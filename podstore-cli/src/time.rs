//! Durations as people write them (`put --ttl 1h30m`) and instants as `ls --long` shows them
//! (UTC, ISO 8601, to the second).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Parses a duration written as one or more `<number><unit>` parts, units `ms`, `s`, `m`, `h`,
/// `d`, `w` (`90s`, `15m`, `1h30m`, `7d`). The error says what is wrong, for the usage message.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("empty duration (write e.g. 90s, 15m, 1h30m, 7d)".into());
    }
    let mut total = Duration::ZERO;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(format!("{text:?}: expected a number at {rest:?}"));
        }
        let n: u64 = rest[..digits]
            .parse()
            .map_err(|e| format!("{text:?}: {e}"))?;
        rest = &rest[digits..];
        let unit_len = rest.bytes().take_while(u8::is_ascii_alphabetic).count();
        let unit = match &rest[..unit_len] {
            "ms" => Duration::from_millis(1),
            "s" => Duration::from_secs(1),
            "m" => Duration::from_secs(60),
            "h" => Duration::from_secs(3600),
            "d" => Duration::from_secs(86_400),
            "w" => Duration::from_secs(7 * 86_400),
            "" => return Err(format!("{text:?}: a unit after {n} (ms, s, m, h, d or w)")),
            other => {
                return Err(format!(
                    "{text:?}: unknown unit {other:?} (ms, s, m, h, d or w)"
                ));
            }
        };
        rest = &rest[unit_len..];
        let part = u32::try_from(n)
            .ok()
            .and_then(|n| unit.checked_mul(n))
            .ok_or_else(|| format!("{text:?}: too long"))?;
        total = total
            .checked_add(part)
            .ok_or_else(|| format!("{text:?}: too long"))?;
    }
    Ok(total)
}

/// `t` in UTC as `YYYY-MM-DDTHH:MM:SSZ` (rounded down to the second; before 1970 as 1970).
pub(crate) fn utc(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// The proleptic Gregorian date of day `z` since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_in_every_unit_and_combined() {
        let s = Duration::from_secs;
        assert_eq!(parse_duration("90s"), Ok(s(90)));
        assert_eq!(parse_duration("15m"), Ok(s(900)));
        assert_eq!(parse_duration("1h"), Ok(s(3600)));
        assert_eq!(parse_duration("1h30m"), Ok(s(5400)));
        assert_eq!(parse_duration(" 2d "), Ok(s(172_800)));
        assert_eq!(parse_duration("1w"), Ok(s(604_800)));
        assert_eq!(parse_duration("1500ms"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
        for bad in ["", "h", "10", "10x", "1h-5m", "-1s", "99999999999h"] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn instants_in_utc() {
        assert_eq!(utc(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        // 2000-02-29 (a leap day of a century year) 12:34:56.
        let t = UNIX_EPOCH + Duration::from_secs(951_827_696);
        assert_eq!(utc(t), "2000-02-29T12:34:56Z");
        // The last second of 9999, the latest expiry the store accepts.
        let t = UNIX_EPOCH + Duration::from_millis(253_402_300_799_999);
        assert_eq!(utc(t), "9999-12-31T23:59:59Z");
    }
}
