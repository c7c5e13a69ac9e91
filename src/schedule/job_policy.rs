//! jobsd's per-job tick policy (`"policy"` on `POST /jobsd/v1/jobs/{name}`): how missed ticks,
//! a target that is down, overlapping ticks, slow attempts and jitter are handled. Every
//! default is Dapr's behaviour. Parsed here from the strings the API carries, with errors
//! that name the field.

use chrono::TimeDelta;

use super::cron::{DstPolicy, Gap, Repeat};

/// Ticks missed while the scheduler was down or behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CatchUp {
    /// Every missed tick runs (Dapr).
    #[default]
    All,
    /// Missed ticks run once, at the latest nominal time.
    Latest,
    /// Missed ticks are skipped.
    None,
    /// Ticks older than this are skipped.
    Window(TimeDelta),
}

/// A tick that comes while the target (the app) cannot take it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WhileTargetDown {
    /// Held and delivered when the target is back (Dapr).
    #[default]
    Stage,
    /// Not run; counted as skipped.
    Skip,
    /// At most one held: the latest.
    Latest,
}

/// A tick due while an earlier one is still in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Overlap {
    /// It waits for the one in flight (Dapr).
    #[default]
    Serial,
    /// It is skipped and counted.
    Skip,
    /// At most one waits; later ones are skipped.
    BufferOne,
    /// Up to this many run at once.
    Allow(u32),
}

/// Most executions of one job `overlap: allow` lets run at once: each holds a little memory
/// and a delivery, and a bound keeps a runaway schedule from holding unbounded amounts.
pub const MAX_CONCURRENT: u32 = 1000;

/// The tick policy of one job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TickPolicy {
    /// Local times a DST change skips or repeats, for `TZ=` schedules.
    pub dst: DstPolicy,
    /// Missed ticks.
    pub catch_up: CatchUp,
    /// Target down.
    pub while_target_down: WhileTargetDown,
    /// Overlapping ticks.
    pub overlap: Overlap,
    /// An attempt running longer is cancelled and counts as failed.
    pub timeout: Option<TimeDelta>,
    /// Every tick fires this much later than its nominal time: a fixed offset in
    /// `[0, jitter)` per job (see [`TickPolicy::offset`]).
    pub jitter: Option<TimeDelta>,
    /// Async completion opted in: an attempt the app answers with a plain `202 Accepted` is
    /// held under a lease this long (see [`lease_length`]).
    pub lease: Option<TimeDelta>,
}

/// Lease of an execution held without `policy.lease` (answered with `Jobsd-Async: true`).
pub const DEFAULT_LEASE: TimeDelta = TimeDelta::minutes(5);

/// Shortest lease (`policy.lease`, a heartbeat's `lease`).
pub const MIN_LEASE: TimeDelta = TimeDelta::seconds(1);

/// Longest lease: a held execution keeps its job's slot, so a lease must run out some day.
pub const MAX_LEASE: TimeDelta = TimeDelta::hours(24);

/// A lease length given as a Go duration (`policy.lease`, a heartbeat's `lease`): `None` when
/// empty, else between [`MIN_LEASE`] and [`MAX_LEASE`]; the error names `field`.
pub fn lease_length(field: &str, text: &str) -> Result<Option<TimeDelta>, String> {
    let Some(lease) = positive_duration(field, text)? else {
        return Ok(None);
    };
    if lease < MIN_LEASE || lease > MAX_LEASE {
        return Err(format!("{field}: {text:?} must be between 1s and 24h"));
    }
    Ok(Some(lease))
}

/// What happens to a tick whose retries are spent.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum OnExhausted {
    /// Given up; the schedule goes on (Dapr).
    #[default]
    Drop,
    /// The job is paused until resumed.
    Pause,
    /// The named job (of the same owner) is scheduled once with the data and the error.
    DeadLetter(String),
}

/// The strings of a tick policy as the API carries them (empty = default).
#[derive(Debug, Clone, Copy, Default)]
pub struct TickPolicyText<'a> {
    /// `all` | `latest` | `none` | `window`.
    pub catch_up: &'a str,
    /// Go duration, with `window`.
    pub catch_up_window: &'a str,
    /// `stage` | `skip` | `latest`.
    pub while_target_down: &'a str,
    /// `serial` | `skip` | `bufferOne` | `allow`.
    pub overlap: &'a str,
    /// With `allow`.
    pub max_concurrent: u32,
    /// Go duration.
    pub timeout: &'a str,
    /// Go duration.
    pub jitter: &'a str,
    /// Go duration, 1s to 24h.
    pub lease: &'a str,
    /// `skip` | `shift`.
    pub dst_gap: &'a str,
    /// `first` | `last` | `twice`.
    pub dst_repeat: &'a str,
}

/// A Go duration that must be positive, or `None` when empty; the error names `field`.
pub fn positive_duration(field: &str, text: &str) -> Result<Option<TimeDelta>, String> {
    if text.is_empty() {
        return Ok(None);
    }
    let nanos = super::duration::parse(text)
        .map_err(|e| format!("{field}: {text:?} is not a duration: {e}"))?;
    if nanos <= 0 {
        return Err(format!("{field}: {text:?} must be more than 0"));
    }
    Ok(Some(TimeDelta::nanoseconds(nanos)))
}

fn one_of<T: Copy>(field: &str, text: &str, choices: &[(&str, T)]) -> Result<T, String> {
    choices
        .iter()
        .find(|(name, _)| *name == text)
        .map(|(_, v)| *v)
        .ok_or_else(|| {
            let names: Vec<_> = choices.iter().map(|(n, _)| *n).collect();
            format!("{field}: {text:?} is not one of {}", names.join(", "))
        })
}

impl TickPolicy {
    /// Parses and checks a policy; errors name the field (`policy.catchUp`, …).
    pub fn parse(t: &TickPolicyText<'_>) -> Result<TickPolicy, String> {
        let window = positive_duration("policy.catchUpWindow", t.catch_up_window)?;
        let catch_up = match t.catch_up {
            "" | "all" => CatchUp::All,
            "latest" => CatchUp::Latest,
            "none" => CatchUp::None,
            "window" => CatchUp::Window(window.ok_or_else(|| {
                "policy.catchUpWindow: required with catchUp \"window\"".to_owned()
            })?),
            other => {
                return Err(format!(
                    "policy.catchUp: {other:?} is not one of all, latest, none, window"
                ));
            }
        };
        if window.is_some() && !matches!(catch_up, CatchUp::Window(_)) {
            return Err("policy.catchUpWindow: only with catchUp \"window\"".to_owned());
        }
        let while_target_down = if t.while_target_down.is_empty() {
            WhileTargetDown::Stage
        } else {
            one_of(
                "policy.whileTargetDown",
                t.while_target_down,
                &[
                    ("stage", WhileTargetDown::Stage),
                    ("skip", WhileTargetDown::Skip),
                    ("latest", WhileTargetDown::Latest),
                ],
            )?
        };
        let overlap = match t.overlap {
            "" | "serial" => Overlap::Serial,
            "skip" => Overlap::Skip,
            "bufferOne" => Overlap::BufferOne,
            "allow" => {
                if t.max_concurrent == 0 {
                    return Err(
                        "policy.maxConcurrent: required (1 or more) with overlap \"allow\""
                            .to_owned(),
                    );
                }
                if t.max_concurrent > MAX_CONCURRENT {
                    return Err(format!(
                        "policy.maxConcurrent: {} is more than {MAX_CONCURRENT}",
                        t.max_concurrent
                    ));
                }
                Overlap::Allow(t.max_concurrent)
            }
            other => {
                return Err(format!(
                    "policy.overlap: {other:?} is not one of serial, skip, bufferOne, allow"
                ));
            }
        };
        if t.max_concurrent != 0 && !matches!(overlap, Overlap::Allow(_)) {
            return Err("policy.maxConcurrent: only with overlap \"allow\"".to_owned());
        }
        if while_target_down == WhileTargetDown::Latest && matches!(overlap, Overlap::Allow(_)) {
            // Several executions out at once have no single "latest" to keep.
            return Err(
                "policy.whileTargetDown: \"latest\" cannot be combined with overlap \"allow\""
                    .to_owned(),
            );
        }
        let dst = DstPolicy {
            gap: (!t.dst_gap.is_empty())
                .then(|| Gap::parse(t.dst_gap))
                .transpose()
                .map_err(|e| format!("policy.dst.gap: {e}"))?,
            repeat: (!t.dst_repeat.is_empty())
                .then(|| Repeat::parse(t.dst_repeat))
                .transpose()
                .map_err(|e| format!("policy.dst.repeat: {e}"))?,
        };
        Ok(TickPolicy {
            dst,
            catch_up,
            while_target_down,
            overlap,
            timeout: positive_duration("policy.timeout", t.timeout)?,
            jitter: positive_duration("policy.jitter", t.jitter)?,
            lease: lease_length("policy.lease", t.lease)?,
        })
    }

    /// Whether every choice is Dapr's.
    pub fn is_default(&self) -> bool {
        *self == TickPolicy::default()
    }

    /// The job's fixed jitter offset in `[0, jitter)`, chosen by `seed` (a hash of its key).
    pub fn offset(&self, seed: u64) -> TimeDelta {
        match self.jitter.and_then(|j| j.num_nanoseconds()) {
            Some(span) if span > 0 => {
                let unit = super::policy::unit(seed, 0);
                TimeDelta::nanoseconds(((span as f64) * unit) as i64 % span)
            }
            _ => TimeDelta::zero(),
        }
    }
}

impl OnExhausted {
    /// `drop` | `pause` | `deadLetter` (with `dead_letter_job`); errors name the field.
    pub fn parse(text: &str, dead_letter_job: &str) -> Result<OnExhausted, String> {
        let parsed = match text {
            "" | "drop" => OnExhausted::Drop,
            "pause" => OnExhausted::Pause,
            "deadLetter" => {
                if dead_letter_job.is_empty() {
                    return Err(
                        "failurePolicy.deadLetterJob: required with onExhausted \"deadLetter\""
                            .to_owned(),
                    );
                }
                super::name::validate(dead_letter_job).map_err(|e| {
                    format!("failurePolicy.deadLetterJob: {dead_letter_job:?}: {e}")
                })?;
                return Ok(OnExhausted::DeadLetter(dead_letter_job.to_owned()));
            }
            other => {
                return Err(format!(
                    "failurePolicy.onExhausted: {other:?} is not one of drop, pause, deadLetter"
                ));
            }
        };
        if !dead_letter_job.is_empty() {
            return Err(
                "failurePolicy.deadLetterJob: only with onExhausted \"deadLetter\"".to_owned(),
            );
        }
        Ok(parsed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_daprs_and_errors_name_the_field() {
        assert!(
            TickPolicy::parse(&TickPolicyText::default())
                .unwrap()
                .is_default()
        );
        let full = TickPolicy::parse(&TickPolicyText {
            catch_up: "window",
            catch_up_window: "10m",
            while_target_down: "skip",
            overlap: "allow",
            max_concurrent: 3,
            timeout: "30s",
            jitter: "5s",
            lease: "10m",
            dst_gap: "shift",
            dst_repeat: "first",
        })
        .unwrap();
        assert_eq!(full.lease, Some(TimeDelta::minutes(10)));
        assert_eq!(full.catch_up, CatchUp::Window(TimeDelta::minutes(10)));
        assert_eq!(
            full.dst,
            DstPolicy {
                gap: Some(Gap::Shift),
                repeat: Some(Repeat::First)
            }
        );
        assert!(
            TickPolicy::parse(&TickPolicyText {
                dst_repeat: "both",
                ..Default::default()
            })
            .unwrap_err()
            .starts_with("policy.dst.repeat: invalid dst.repeat \"both\"")
        );
        assert_eq!(full.while_target_down, WhileTargetDown::Skip);
        assert_eq!(full.overlap, Overlap::Allow(3));
        assert_eq!(full.timeout, Some(TimeDelta::seconds(30)));
        for (text, want) in [
            (
                TickPolicyText {
                    catch_up: "sometimes",
                    ..Default::default()
                },
                "policy.catchUp: \"sometimes\" is not one of all, latest, none, window",
            ),
            (
                TickPolicyText {
                    catch_up: "window",
                    ..Default::default()
                },
                "policy.catchUpWindow: required with catchUp \"window\"",
            ),
            (
                TickPolicyText {
                    overlap: "allow",
                    ..Default::default()
                },
                "policy.maxConcurrent: required (1 or more) with overlap \"allow\"",
            ),
            (
                TickPolicyText {
                    timeout: "-1s",
                    ..Default::default()
                },
                "policy.timeout: \"-1s\" must be more than 0",
            ),
            (
                TickPolicyText {
                    while_target_down: "wait",
                    ..Default::default()
                },
                "policy.whileTargetDown: \"wait\" is not one of stage, skip, latest",
            ),
        ] {
            assert_eq!(TickPolicy::parse(&text).unwrap_err(), want);
        }
        assert!(
            TickPolicy::parse(&TickPolicyText {
                jitter: "soon",
                ..Default::default()
            })
            .unwrap_err()
            .starts_with("policy.jitter: \"soon\" is not a duration")
        );
    }

    #[test]
    fn leases_are_bounded_and_errors_name_the_field() {
        assert_eq!(lease_length("policy.lease", ""), Ok(None));
        assert_eq!(lease_length("lease", "1s"), Ok(Some(MIN_LEASE)));
        assert_eq!(lease_length("lease", "24h"), Ok(Some(MAX_LEASE)));
        for (text, want) in [
            (
                "999ms",
                "policy.lease: \"999ms\" must be between 1s and 24h",
            ),
            (
                "24h1s",
                "policy.lease: \"24h1s\" must be between 1s and 24h",
            ),
            ("0s", "policy.lease: \"0s\" must be more than 0"),
        ] {
            assert_eq!(lease_length("policy.lease", text).unwrap_err(), want);
        }
        assert!(
            lease_length("policy.lease", "long")
                .unwrap_err()
                .starts_with("policy.lease: \"long\" is not a duration")
        );
    }

    #[test]
    fn jitter_offset_is_fixed_per_job_and_bounded() {
        let p = TickPolicy {
            jitter: Some(TimeDelta::seconds(10)),
            ..TickPolicy::default()
        };
        let mut seen = std::collections::BTreeSet::new();
        for seed in 0..500u64 {
            let o = p.offset(seed);
            assert!(o >= TimeDelta::zero() && o < TimeDelta::seconds(10), "{o}");
            assert_eq!(o, p.offset(seed));
            seen.insert(o.num_seconds());
        }
        assert_eq!(seen.len(), 10, "offsets spread over the range");
        assert_eq!(TickPolicy::default().offset(7), TimeDelta::zero());
    }

    #[test]
    fn on_exhausted_choices() {
        assert_eq!(OnExhausted::parse("", ""), Ok(OnExhausted::Drop));
        assert_eq!(OnExhausted::parse("pause", ""), Ok(OnExhausted::Pause));
        assert_eq!(
            OnExhausted::parse("deadLetter", "dlq"),
            Ok(OnExhausted::DeadLetter("dlq".into()))
        );
        assert!(OnExhausted::parse("deadLetter", "").is_err());
        assert!(OnExhausted::parse("pause", "dlq").is_err());
        assert!(OnExhausted::parse("retry", "").is_err());
    }
}
