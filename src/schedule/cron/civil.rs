//! Proleptic Gregorian calendar arithmetic on `i64` day counts (Howard Hinnant's
//! `days_from_civil`/`civil_from_days`), shared by both `next` engines. Plain integer maths is
//! what makes the UTC path fast; chrono's checked constructors cost more than the search.

/// Days since 1970-01-01 for a (year, month 1-12, day 1-31) date.
pub(super) fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let (month, day) = (i64::from(month), i64::from(day));
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = if month > 2 { month - 3 } else { month + 9 };
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The (year, month 1-12, day 1-31) date `days` after 1970-01-01.
pub(super) fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    // Both are small and non-negative by construction.
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Day of the week for a day count, Sunday = 0 (1970-01-01 was a Thursday).
pub(super) fn weekday(days: i64) -> u32 {
    (days + 4).rem_euclid(7) as u32
}

/// Number of days in a month.
pub(super) fn month_len(year: i64, month: u32) -> u32 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        _ => 28,
    }
}
