//! Ticks a policy passes over (`catchUp`, `whileTargetDown`, `overlap`): counted and written
//! as one `skipped` run, and the job queued again when its target is back.

use super::*;

impl Runner {
    /// Queues a job whose target can take triggers again. `whileTargetDown: latest` passes
    /// over every tick held or missed meanwhile but the latest.
    pub(super) fn target_back(&mut self, key: &Arc<str>) {
        let now = self.clock.now();
        let Some(entry) = self.jobs.get(key) else {
            return;
        };
        if matches!(entry.plan.policy().overlap, Overlap::Allow(_)) {
            // Its held executions go again now.
            self.requeue_overlapping(key);
            return;
        }
        if entry.plan.policy().while_target_down == WhileTargetDown::Latest {
            // The held tick goes too when a later one is due, even in the middle of its
            // retries.
            let held = Counter {
                attempts: 0,
                ..entry.counter
            };
            if let Some((counter, skipped)) = entry.plan.pass_over(&held, Keep::Latest(now)) {
                let generation = entry.generation;
                self.skip_ticks(
                    key.clone(),
                    generation,
                    counter,
                    skipped,
                    Skip::TargetDown,
                    now,
                );
                return;
            }
        }
        let at = entry.plan.fire_time(&entry.counter).unwrap_or(now);
        self.jobs.schedule(key, at);
    }

    /// Passes over `skipped` ticks of a job (a policy said so): one `skipped` run standing
    /// for them, counted under `why`, written with `counter`, the progress after them.
    pub(super) fn skip_ticks(
        &mut self,
        key: Arc<str>,
        generation: u64,
        counter: Counter,
        skipped: u32,
        why: Skip,
        now: DateTime<Utc>,
    ) {
        let Some(entry) = self.jobs.get(&key) else {
            return;
        };
        let next = entry.plan.fire_time(&counter);
        self.outlet.metrics.skipped_many(why, u64::from(skipped));
        self.jobs.set_persisting(&key);
        self.push_result(Persisted {
            run: Some(StoredRun {
                nominal: Some(convert::timestamp(counter.last_trigger.unwrap_or(now))),
                started: Some(convert::timestamp(now)),
                finished: Some(convert::timestamp(now)),
                outcome: RunOutcome::Skipped.into(),
                error: skip_reason(why).to_owned(),
                ..StoredRun::default()
            }),
            skipped_ticks: skipped,
            ..Persisted::step(key, generation, counter, next)
        });
    }
}

/// The reason a run of skipped ticks shows: the metric's label, except that ticks passed
/// over by `policy.catchUp` read `catch_up`.
pub(super) fn skip_reason(why: Skip) -> &'static str {
    match why {
        Skip::Missed => "catch_up",
        other => other.as_str(),
    }
}
