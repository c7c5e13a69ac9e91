//! The UTC engine: kit's search, but each field jumps straight to its next set bit
//! (`(mask >> cur).trailing_zeros()`) instead of stepping one unit at a time, on plain civil
//! arithmetic. Without a zone there are no gaps or folds, so jumping finds exactly what kit's
//! unit-stepping walk finds; the differential proptest in `tests.rs` holds it to that.

use chrono::{DateTime, Utc};

use super::civil::{civil_from_days, days_from_civil, month_len, weekday};
use super::{STAR_BIT, SpecSchedule};

const SECS_PER_DAY: i64 = 86_400;

/// The first set bit of `mask` at or above `from` (`from` < 64).
#[inline]
fn next_bit(mask: u64, from: u32) -> Option<u32> {
    match mask.checked_shr(from) {
        Some(rest) if rest != 0 => Some(from + rest.trailing_zeros()),
        _ => None,
    }
}

/// Bits 1..=len, the days that exist in a month of `len` days.
#[inline]
fn days_in(len: u32) -> u64 {
    ((1u64 << (len + 1)) - 1) & !1
}

/// A civil UTC time being searched forward.
struct Cursor {
    year: i64,
    month: u32,
    day: u32,
    hour: u32,
    minute: u32,
    second: u32,
}

impl Cursor {
    fn next_month(&mut self) {
        if self.month == 12 {
            self.year += 1;
            self.month = 1;
        } else {
            self.month += 1;
        }
        (self.day, self.hour, self.minute, self.second) = (1, 0, 0, 0);
    }

    fn next_day(&mut self, len: u32) {
        if self.day >= len {
            self.next_month();
        } else {
            self.day += 1;
            (self.hour, self.minute, self.second) = (0, 0, 0);
        }
    }

    fn next_hour(&mut self, len: u32) {
        if self.hour >= 23 {
            self.next_day(len);
        } else {
            self.hour += 1;
            (self.minute, self.second) = (0, 0);
        }
    }

    fn next_minute(&mut self, len: u32) {
        if self.minute >= 59 {
            self.next_hour(len);
        } else {
            self.minute += 1;
            self.second = 0;
        }
    }
}

/// The first instant after `after`, read in UTC, that matches every field, searching up to the
/// end of the year five years after the start (kit's `yearLimit`).
pub(super) fn next(s: &SpecSchedule, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let second = s.bits.second & !STAR_BIT;
    let minute = s.bits.minute & !STAR_BIT;
    let hour = s.bits.hour & !STAR_BIT;
    let month = s.bits.month & !STAR_BIT;
    if second == 0 || minute == 0 || hour == 0 || month == 0 {
        return None;
    }

    // Kit starts at the next whole second; chrono's leap-second form (nanos >= 1e9) also
    // lands on the following second this way.
    let start = after.timestamp().checked_add(1)?;
    let (year, month_now, day) = civil_from_days(start.div_euclid(SECS_PER_DAY));
    let sod = start.rem_euclid(SECS_PER_DAY) as u32;
    let mut c = Cursor {
        year,
        month: month_now,
        day,
        hour: sod / 3600,
        minute: sod / 60 % 60,
        second: sod % 60,
    };
    let year_limit = year + 5;

    loop {
        if c.year > year_limit {
            return None;
        }
        if month >> c.month & 1 == 0 {
            match next_bit(month, c.month) {
                Some(m) => c.month = m,
                None => {
                    c.year += 1;
                    c.month = month.trailing_zeros();
                }
            }
            (c.day, c.hour, c.minute, c.second) = (1, 0, 0, 0);
            continue;
        }

        let first = days_from_civil(c.year, c.month, 1);
        let len = month_len(c.year, c.month);
        let days = s.days_by_first_weekday[weekday(first) as usize] & days_in(len);
        if days >> c.day & 1 == 0 {
            match next_bit(days, c.day) {
                Some(d) => (c.day, c.hour, c.minute, c.second) = (d, 0, 0, 0),
                None => {
                    c.next_month();
                    continue;
                }
            }
        }
        if hour >> c.hour & 1 == 0 {
            match next_bit(hour, c.hour) {
                Some(h) => (c.hour, c.minute, c.second) = (h, 0, 0),
                None => {
                    c.next_day(len);
                    continue;
                }
            }
        }
        if minute >> c.minute & 1 == 0 {
            match next_bit(minute, c.minute) {
                Some(m) => (c.minute, c.second) = (m, 0),
                None => {
                    c.next_hour(len);
                    continue;
                }
            }
        }
        if second >> c.second & 1 == 0 {
            match next_bit(second, c.second) {
                Some(sec) => c.second = sec,
                None => {
                    c.next_minute(len);
                    continue;
                }
            }
        }

        let day_start = (first + i64::from(c.day) - 1) * SECS_PER_DAY;
        let secs =
            day_start + i64::from(c.hour) * 3600 + i64::from(c.minute) * 60 + i64::from(c.second);
        return DateTime::from_timestamp(secs, 0);
    }
}
