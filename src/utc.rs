//! Timestamps as people read them: seconds since the epoch as a UTC date and time, for
//! `ls -l` (nanoseconds kept, so a listing shows what the archive holds exactly).

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
    use super::date_time;

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
