//! Dapr's cron grammar: a port of `dapr/kit` `cron/{parser,spec,constantdelay}.go` as
//! go-etcd-cron configures it (`Second | Minute | Hour | Dom | Month | Dow | Descriptor`).
//!
//! What is accepted, and the error text for what is not, follows the Go source line by line,
//! including the v1.18.3 fixes (a time-zone prefix with nothing after it is an error, and a
//! time-zone prefix before `@every` is rejected).
//!
//! `next` has two engines that must agree:
//! - `walk` transcribes kit's `Next` loop onto chrono-tz, Go's `time.Date` normalisation
//!   included, so DST gaps and folds behave as in Dapr. It serves `TZ=` schedules and is the
//!   test oracle.
//! - `fast` jumps between set bits on plain civil UTC arithmetic. It serves every schedule
//!   evaluated in UTC, which is all of them unless a `TZ=` prefix names a real zone.
//!
//! `next_with` takes a per-job [`DstPolicy`]; without a choice it is `next`, with one `dst`
//! computes the policy's definition span by span on top of `fast`.

use std::str::FromStr;

use chrono::{DateTime, TimeDelta, Utc};
use chrono_tz::Tz;

use super::duration;

mod civil;
mod dst;
mod fast;
mod field;
mod walk;

pub use dst::{DstPolicy, DstPolicyError, Gap, Repeat, Transition, transitions};
pub use field::AtoiError;
use field::{Bounds, DOM, DOW, HOURS, MINUTES, MONTHS, SECONDS, all, get_field};

#[cfg(test)]
mod tests;

/// Set in a field's bits when the field was written as `*` or `?`; it drives the DOM/DOW rule.
const STAR_BIT: u64 = 1 << 63;

/// A parsed Dapr schedule.
#[derive(Debug, Clone, PartialEq)]
pub enum Schedule {
    /// Six cron fields, or a descriptor such as `@daily` that stands for six fields.
    Spec(SpecSchedule),
    /// `@every <duration>`: each activation is the previous one plus a fixed delay.
    Every(ConstantDelay),
}

/// Parses a Dapr schedule: six cron fields, a descriptor, or `@every <Go duration>`, each
/// optionally behind a `TZ=<zone> ` / `CRON_TZ=<zone> ` prefix (not allowed with `@every`).
pub fn parse(spec: &str) -> Result<Schedule, Error> {
    if spec.is_empty() {
        return Err(Error::Empty);
    }
    let mut location = Location::Local;
    let mut rest = spec;
    if spec.starts_with("TZ=") || spec.starts_with("CRON_TZ=") {
        let Some(space) = spec.find(char::is_whitespace) else {
            return Err(Error::TimezoneWithoutSchedule {
                spec: spec.to_owned(),
            });
        };
        // The prefix guarantees an '=' before the first whitespace.
        let name_start = spec.find('=').map_or(0, |eq| eq + 1);
        let name = &spec[name_start..space];
        location = load_location(name).map_err(|cause| Error::BadLocation {
            name: name.to_owned(),
            cause,
        })?;
        rest = spec[space..].trim();
        // A constant delay has no wall clock for a zone to apply to; kit rejects the pair
        // rather than silently dropping the zone (dapr/kit#161, shipped in Dapr 1.18.3).
        if rest.starts_with("@every ") {
            return Err(Error::TimezoneWithEvery {
                spec: spec.to_owned(),
            });
        }
    }
    if rest.starts_with('@') {
        return parse_descriptor(rest, location);
    }

    let fields: Vec<&str> = rest.split_whitespace().collect();
    let [second, minute, hour, dom, month, dow] = fields[..] else {
        return Err(Error::FieldCount {
            fields: fields.iter().map(|f| (*f).to_owned()).collect(),
        });
    };
    Ok(Schedule::Spec(SpecSchedule::new(
        Bits {
            second: get_field(second, &SECONDS)?,
            minute: get_field(minute, &MINUTES)?,
            hour: get_field(hour, &HOURS)?,
            dom: get_field(dom, &DOM)?,
            month: get_field(month, &MONTHS)?,
            dow: get_field(dow, &DOW)?,
        },
        location,
    )))
}

impl FromStr for Schedule {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse(s)
    }
}

impl Schedule {
    /// The next activation strictly after `after`, or `None` when nothing matches within five
    /// years (Go returns the zero time there) or the answer falls outside chrono's range.
    ///
    /// `@every d` is `after + d` exactly, as in kit; so, as in Dapr, `@every 0s` returns
    /// `after` itself and a negative delay returns an earlier instant.
    pub fn next(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match self {
            Schedule::Spec(spec) => spec.next(after),
            Schedule::Every(every) => every.next(after),
        }
    }

    /// The next activation strictly after `after` under a daylight-saving policy.
    ///
    /// This is [`next`](Self::next) whenever the policy is Dapr's ([`DstPolicy::is_dapr`]) or
    /// the schedule is not read in a named zone (no prefix, a UTC alias, `@every`). Otherwise
    /// it is the policy's definition (see [`DstPolicy`]): the same as `next` away from
    /// transitions, except where Dapr's own quirks reach further (gaps at midnight). The
    /// answer is always later than `after`, so chained ticks strictly increase, and as with
    /// `next` it is `None` past the end of the local year five years on.
    pub fn next_with(&self, after: DateTime<Utc>, dst: &DstPolicy) -> Option<DateTime<Utc>> {
        match self {
            Schedule::Spec(spec) => spec.next_with(after, dst),
            Schedule::Every(every) => every.next(after),
        }
    }
}

/// The six cron fields as bit sets (bit `n` set means value `n` matches; bit 63 is the star
/// bit), plus the zone they are read in.
#[derive(Debug, Clone, PartialEq)]
pub struct SpecSchedule {
    bits: Bits,
    location: Location,
    /// Matching days of the month, indexed by the weekday of the month's first day, before
    /// clipping to the month's length; precomputed so the UTC path does no per-day work.
    days_by_first_weekday: [u64; 7],
}

/// The raw field bit sets, exactly as kit stores them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Bits {
    second: u64,
    minute: u64,
    hour: u64,
    dom: u64,
    month: u64,
    dow: u64,
}

/// Where a spec's fields are read.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Location {
    /// No prefix (or `TZ=Local`): Go evaluates in the location of the time passed in, which is
    /// UTC for Dapr.
    Local,
    /// A named zone from the prefix.
    Zone(Tz),
}

impl SpecSchedule {
    fn new(bits: Bits, location: Location) -> Self {
        let mut days_by_first_weekday = [0u64; 7];
        let either = bits.dom & STAR_BIT != 0 || bits.dow & STAR_BIT != 0;
        for (first, days) in (0u32..).zip(days_by_first_weekday.iter_mut()) {
            let mut dow_days = 0u64;
            for day in 1..=31u32 {
                if bits.dow >> ((first + day - 1) % 7) & 1 != 0 {
                    dow_days |= 1 << day;
                }
            }
            let dom_days = bits.dom & !STAR_BIT;
            *days = if either {
                dom_days & dow_days
            } else {
                dom_days | dow_days
            };
        }
        SpecSchedule {
            bits,
            location,
            days_by_first_weekday,
        }
    }

    /// Seconds bit set (bits 0-59, plus the star bit).
    pub fn second_bits(&self) -> u64 {
        self.bits.second
    }

    /// Minutes bit set (bits 0-59, plus the star bit).
    pub fn minute_bits(&self) -> u64 {
        self.bits.minute
    }

    /// Hours bit set (bits 0-23, plus the star bit).
    pub fn hour_bits(&self) -> u64 {
        self.bits.hour
    }

    /// Day-of-month bit set (bits 1-31, plus the star bit).
    pub fn dom_bits(&self) -> u64 {
        self.bits.dom
    }

    /// Month bit set (bits 1-12, plus the star bit).
    pub fn month_bits(&self) -> u64 {
        self.bits.month
    }

    /// Day-of-week bit set (bits 0-6, Sunday = 0, plus the star bit).
    pub fn dow_bits(&self) -> u64 {
        self.bits.dow
    }

    /// The zone named by a `TZ=`/`CRON_TZ=` prefix; `None` means the fields are read in UTC.
    pub fn time_zone(&self) -> Option<Tz> {
        match self.location {
            Location::Local => None,
            Location::Zone(tz) => Some(tz),
        }
    }

    /// The next activation strictly after `after`; see [`Schedule::next`].
    pub fn next(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match self.location {
            Location::Zone(tz) if !is_utc(tz) => walk::next(self, tz, after),
            _ => fast::next(self, after),
        }
    }

    /// The first wall-clock time in `[from, stop)` that the fields match, reading the fields
    /// on a civil clock (no zone): what the schedule would pick if `from..stop` existed.
    pub fn first_wall_match(
        &self,
        from: chrono::NaiveDateTime,
        stop: chrono::NaiveDateTime,
    ) -> Option<chrono::NaiveDateTime> {
        let from = from.and_utc().timestamp();
        let stop = stop.and_utc().timestamp();
        dst::first_match(self, from, stop)
            .and_then(|wall| DateTime::from_timestamp(wall, 0))
            .map(|wall| wall.naive_utc())
    }

    /// The next activation strictly after `after` under a daylight-saving policy; see
    /// [`Schedule::next_with`].
    pub fn next_with(&self, after: DateTime<Utc>, dst: &DstPolicy) -> Option<DateTime<Utc>> {
        match self.location {
            Location::Zone(tz) if !is_utc(tz) && !dst.is_dapr() => dst::next(self, tz, after, dst),
            _ => self.next(after),
        }
    }

    /// Kit's `dayMatches`: with a star in either day field both must match, otherwise either.
    fn day_matches(&self, day: u32, weekday: u32) -> bool {
        let dom = self.bits.dom >> day & 1 != 0;
        let dow = self.bits.dow >> weekday & 1 != 0;
        if self.bits.dom & STAR_BIT != 0 || self.bits.dow & STAR_BIT != 0 {
            dom && dow
        } else {
            dom || dow
        }
    }
}

/// Zones that are UTC+0 for all of time, so the UTC fast path gives the walk's answer.
fn is_utc(tz: Tz) -> bool {
    matches!(
        tz,
        Tz::UTC
            | Tz::Etc__UTC
            | Tz::Etc__UCT
            | Tz::UCT
            | Tz::Etc__Universal
            | Tz::Universal
            | Tz::Etc__Zulu
            | Tz::Zulu
            | Tz::GMT
            | Tz::Etc__GMT
            | Tz::Etc__GMTPlus0
            | Tz::Etc__GMTMinus0
            | Tz::Etc__GMT0
            | Tz::GMTPlus0
            | Tz::GMTMinus0
            | Tz::GMT0
            | Tz::Greenwich
            | Tz::Etc__Greenwich
    )
}

/// `@every <d>`: a fixed delay in nanoseconds, with no rounding or minimum (the dapr fork
/// removed robfig's truncation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConstantDelay {
    nanos: i64,
}

impl ConstantDelay {
    /// The delay in nanoseconds, as Go's `time.Duration`; it may be zero or negative.
    pub fn nanos(&self) -> i64 {
        self.nanos
    }

    /// `after + delay`; `None` only if that leaves chrono's range.
    pub fn next(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        after.checked_add_signed(TimeDelta::nanoseconds(self.nanos))
    }
}

/// Dapr's parse errors; `Display` is the exact Go error text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// `empty spec string`.
    #[error("empty spec string")]
    Empty,
    /// A `TZ=`/`CRON_TZ=` prefix with no whitespace after it (this crashed Dapr before 1.18.3).
    #[error("timezone prefix {spec} is not followed by a schedule")]
    TimezoneWithoutSchedule {
        /// The whole input.
        spec: String,
    },
    /// The zone in the prefix does not exist, e.g.
    /// `provided bad location Not/AZone: unknown time zone Not/AZone`.
    #[error("provided bad location {name}: {cause}")]
    BadLocation {
        /// The zone name as written.
        name: String,
        /// Go's `time.LoadLocation` error text.
        cause: String,
    },
    /// A time-zone prefix before `@every` (rejected since Dapr 1.18.3).
    #[error("timezone is not supported for @every schedules: {spec}")]
    TimezoneWithEvery {
        /// The whole input, prefix included.
        spec: String,
    },
    /// Not six fields, e.g. `expected exactly 6 fields, found 5: [*/5 * * * *]`.
    #[error("expected exactly 6 fields, found {}: [{}]", .fields.len(), .fields.join(" "))]
    FieldCount {
        /// The whitespace-separated fields found.
        fields: Vec<String>,
    },
    /// `too many hyphens: 1-2-3`.
    #[error("too many hyphens: {expr}")]
    TooManyHyphens {
        /// The offending range expression.
        expr: String,
    },
    /// `too many slashes: */2/3`.
    #[error("too many slashes: {expr}")]
    TooManySlashes {
        /// The offending range expression.
        expr: String,
    },
    /// Not an integer or a known name, e.g.
    /// `failed to parse int from x: strconv.Atoi: parsing "x": invalid syntax`.
    #[error("failed to parse int from {expr}: {cause}")]
    ParseInt {
        /// The text that failed to parse.
        expr: String,
        /// Go's `strconv.Atoi` error.
        cause: AtoiError,
    },
    /// `negative number (-5) not allowed: -5`.
    #[error("negative number ({num}) not allowed: {expr}")]
    Negative {
        /// The parsed value.
        num: i64,
        /// The text it came from.
        expr: String,
    },
    /// `beginning of range (0) below minimum (1): 0`.
    #[error("beginning of range ({start}) below minimum ({min}): {expr}")]
    BelowMinimum {
        /// The range start.
        start: u64,
        /// The field's minimum.
        min: u64,
        /// The offending range expression.
        expr: String,
    },
    /// `end of range (60) above maximum (59): 60`.
    #[error("end of range ({end}) above maximum ({max}): {expr}")]
    AboveMaximum {
        /// The range end.
        end: u64,
        /// The field's maximum.
        max: u64,
        /// The offending range expression.
        expr: String,
    },
    /// `beginning of range (5) beyond end of range (3): 5-3`.
    #[error("beginning of range ({start}) beyond end of range ({end}): {expr}")]
    StartAfterEnd {
        /// The range start.
        start: u64,
        /// The range end.
        end: u64,
        /// The offending range expression.
        expr: String,
    },
    /// `step of range should be a positive number: */0`.
    #[error("step of range should be a positive number: {expr}")]
    ZeroStep {
        /// The offending range expression.
        expr: String,
    },
    /// `unrecognized descriptor: @foo`.
    #[error("unrecognized descriptor: {descriptor}")]
    UnrecognizedDescriptor {
        /// The descriptor as written.
        descriptor: String,
    },
    /// `failed to parse duration @every x: time: invalid duration "x"`.
    #[error("failed to parse duration {descriptor}: {cause}")]
    Duration {
        /// The whole `@every ...` descriptor.
        descriptor: String,
        /// Go's `time.ParseDuration` error.
        cause: duration::Error,
    },
}

/// Go's `time.LoadLocation`, on chrono-tz's copy of the IANA database. The error texts are
/// Go's for the cases Go checks before touching the disk; any other failure reads as Go's
/// "not found" text.
fn load_location(name: &str) -> Result<Location, String> {
    match name {
        "" | "UTC" => return Ok(Location::Zone(Tz::UTC)),
        "Local" => return Ok(Location::Local),
        _ => {}
    }
    if name.contains("..") || name.starts_with('/') || name.starts_with('\\') {
        return Err("time: invalid location name".to_owned());
    }
    name.parse::<Tz>()
        .map(Location::Zone)
        .map_err(|_| format!("unknown time zone {name}"))
}

fn parse_descriptor(descriptor: &str, location: Location) -> Result<Schedule, Error> {
    let spec = |second, minute, hour, dom, month, dow| {
        Ok(Schedule::Spec(SpecSchedule::new(
            Bits {
                second,
                minute,
                hour,
                dom,
                month,
                dow,
            },
            location,
        )))
    };
    let first = |b: &Bounds| 1u64 << b.min;
    match descriptor {
        "@yearly" | "@annually" => {
            return spec(
                first(&SECONDS),
                first(&MINUTES),
                first(&HOURS),
                first(&DOM),
                first(&MONTHS),
                all(&DOW),
            );
        }
        "@monthly" => {
            return spec(
                first(&SECONDS),
                first(&MINUTES),
                first(&HOURS),
                first(&DOM),
                all(&MONTHS),
                all(&DOW),
            );
        }
        "@weekly" => {
            return spec(
                first(&SECONDS),
                first(&MINUTES),
                first(&HOURS),
                all(&DOM),
                all(&MONTHS),
                first(&DOW),
            );
        }
        "@daily" | "@midnight" => {
            return spec(
                first(&SECONDS),
                first(&MINUTES),
                first(&HOURS),
                all(&DOM),
                all(&MONTHS),
                all(&DOW),
            );
        }
        "@hourly" => {
            return spec(
                first(&SECONDS),
                first(&MINUTES),
                all(&HOURS),
                all(&DOM),
                all(&MONTHS),
                all(&DOW),
            );
        }
        _ => {}
    }
    if let Some(text) = descriptor.strip_prefix("@every ") {
        return match duration::parse(text) {
            Ok(nanos) => Ok(Schedule::Every(ConstantDelay { nanos })),
            Err(cause) => Err(Error::Duration {
                descriptor: descriptor.to_owned(),
                cause,
            }),
        };
    }
    Err(Error::UnrecognizedDescriptor {
        descriptor: descriptor.to_owned(),
    })
}
