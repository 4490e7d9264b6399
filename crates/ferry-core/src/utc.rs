//! Timestamps as people read them: seconds since the epoch as a UTC date and time, for
//! `ls -l` (nanoseconds kept, so a listing shows what the archive holds exactly), and in
//! ISO 8601's basic form (`20261201T203015Z`), which names snapshots, and back.

/// `secs` (and `nanos`) after 1970-01-01 00:00:00 UTC as `YYYY-MM-DD HH:MM:SS.nnnnnnnnn`;
/// negative seconds are before it.
pub fn date_time(secs: i64, nanos: u32) -> String {
    let days = secs.div_euclid(86_400);
    let in_day = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}.{nanos:09}",
        in_day / 3600,
        in_day % 3600 / 60,
        in_day % 60
    )
}

/// `secs` after the epoch as `YYYYMMDDTHHMMSSZ` (UTC, whole seconds).
pub fn basic(secs: i64) -> String {
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let in_day = secs.rem_euclid(86_400);
    format!(
        "{y:04}{m:02}{d:02}T{:02}{:02}{:02}Z",
        in_day / 3600,
        in_day % 3600 / 60,
        in_day % 60
    )
}

/// The seconds after the epoch that `YYYYMMDDTHHMMSSZ` names; None when `s` is not a
/// valid date and time in that form.
pub fn parse_basic(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() != 16 || b[8] != b'T' || b[15] != b'Z' {
        return None;
    }
    let digits = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = s.get(r)?;
        part.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| part.parse().ok())?
    };
    let (y, m, d) = (digits(0..4)?, digits(4..6)?, digits(6..8)?);
    let (hh, mm, ss) = (digits(9..11)?, digits(11..13)?, digits(13..15)?);
    if !(1..=12).contains(&m) || d < 1 || hh > 23 || mm > 59 || ss > 59 {
        return None;
    }
    let days = days_from_civil(y, m as u32, d as u32);
    // A day past the month's end (February 30) comes back as another date.
    if civil_from_days(days) != (y, m as u32, d as u32) {
        return None;
    }
    Some(days * 86_400 + hh * 3600 + mm * 60 + ss)
}

/// The days after 1970-01-01 of a proleptic Gregorian date (the inverse of
/// [`civil_from_days`], Howard Hinnant's `days_from_civil`).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = i64::from((m + 9) % 12); // month from March, 0..11
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The proleptic Gregorian date `days` after 1970-01-01 (Howard Hinnant's
/// `civil_from_days`: counted in 400-year eras, each 146,097 days, from 0000-03-01, so
/// a leap day falls at the end of a year).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // day of the era, 0..146_096
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // 0..399
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // day of the year from March 1
    let mp = (5 * doy + 2) / 153; // month from March, 0..11
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::{basic, date_time, parse_basic};

    #[test]
    fn basic_form_round_trips_and_refuses_what_is_not_a_date() {
        for secs in [0, 951_782_400, 1_796_157_015, -86_400, 4_102_444_799] {
            assert_eq!(parse_basic(&basic(secs)), Some(secs), "{secs}");
        }
        assert_eq!(basic(1_796_157_015), "20261201T203015Z");
        for bad in [
            "20260230T000000Z",
            "20261301T000000Z",
            "20261201T240000Z",
            "20261201 203015Z",
            "2026120XT203015Z",
            "+0261201T203015Z",
            "20261201T203015",
        ] {
            assert_eq!(parse_basic(bad), None, "{bad}");
        }
    }

    #[test]
    fn dates_match_known_instants() {
        assert_eq!(date_time(0, 0), "1970-01-01 00:00:00.000000000");
        assert_eq!(date_time(951_782_400, 5), "2000-02-29 00:00:00.000000005");
        assert_eq!(date_time(1_795_292_331, 0), "2026-11-21 20:18:51.000000000");
        assert_eq!(date_time(-1, 999_999_999), "1969-12-31 23:59:59.999999999");
        assert_eq!(
            date_time(-11_644_473_600, 0),
            "1601-01-01 00:00:00.000000000"
        );
        assert_eq!(
            date_time(253_402_300_799, 0),
            "9999-12-31 23:59:59.000000000"
        );
    }
}
