//! Handing due triggers to the sink: one delivery task per attempt, cut short by
//! `policy.timeout`, reporting back to the loop.

use super::*;

impl Runner {
    /// Hands due triggers to the sink, as many as it has room for; the rest stay queued (in
    /// time order, with their nominal times) and go as answers come back.
    pub(super) fn fire_due(&mut self) {
        let now = self.clock.now();
        while self.in_sink < self.capacity {
            let Some((key, at)) = self.jobs.pop_due(now) else {
                break;
            };
            if !self.resuming.is_empty()
                && let Some(paused) = self.resumed_tick(&key)
            {
                // Resumed while this tick was in progress: now that it has ended, the ticks
                // that fell due while the job was paused are passed over.
                self.jobs.set_persisting(&key);
                self.push_result(paused);
                continue;
            }
            if self.hold_for_extras(&key, at) {
                continue;
            }
            let Some(entry) = self.jobs.get(&key) else {
                continue;
            };
            if matches!(entry.plan.policy().overlap, Overlap::Allow(_)) {
                self.fire_overlapping(key, now);
                continue;
            }
            if let Some((counter, skipped)) = entry.plan.catch_up(&entry.counter, now) {
                // `policy.catchUp`: the missed ticks are passed over, counted, and the job
                // goes on from the first tick the policy runs.
                let generation = entry.generation;
                self.skip_ticks(key, generation, counter, skipped, Skip::Missed, now);
                continue;
            }
            // The tick this trigger is an attempt of (`at` is pushed back by retries).
            let tick = entry.plan.next_tick(&entry.counter).unwrap_or(at);
            let attempt = entry.counter.attempts.saturating_add(1);
            if !self.admit(&key, at) {
                continue;
            }
            self.hand_out(key, tick, at, attempt, now);
        }
    }

    /// Hands attempt `attempt` of the tick at `tick` of job `key` to the sink, due at `at`.
    pub(super) fn hand_out(
        &mut self,
        key: Arc<str>,
        tick: DateTime<Utc>,
        at: DateTime<Utc>,
        attempt: u32,
        now: DateTime<Utc>,
    ) {
        let Some(entry) = self.jobs.get(&key) else {
            return;
        };
        let trigger = trigger_of(&key, entry, tick, at, attempt, TriggerKind::Schedule);
        let execution_id = trigger.execution_id;
        let generation = entry.generation;
        let timeout = entry.plan.policy().timeout;
        let outlet = self.outlet.clone();
        self.in_sink += 1;
        let fired = outlet.metrics.fired(now - at);
        tokio::spawn(async move {
            let started = outlet.clock.now();
            let delivery = outlet.sink.deliver_reported(trigger);
            let report = match timeout {
                None => delivery.await,
                // Past `policy.timeout` the delivery is dropped (its call cancelled) and
                // the attempt fails, as the failure policy then says.
                Some(limit) => tokio::select! {
                    report = delivery => report,
                    () = outlet.clock.sleep_until(started + limit) => timed_out(limit),
                },
            };
            outlet.metrics.answered(fired, report.result);
            let attempt = Box::new(Attempt {
                execution_id,
                tick,
                attempt,
                kind: TriggerKind::Schedule,
                started,
                finished: outlet.clock.now(),
                report,
            });
            let _ = outlet.tx.send(Command::Done {
                key,
                generation,
                attempt,
            });
        });
    }
}

/// Attempt `attempt` of the execution of `entry` (job `key`) at nominal time `tick`, started
/// for `kind`, due at `at`.
pub(super) fn trigger_of(
    key: &Arc<str>,
    entry: &Entry,
    tick: DateTime<Utc>,
    at: DateTime<Utc>,
    attempt: u32,
    kind: TriggerKind,
) -> Trigger {
    let name_at = usize::try_from(entry.name_at).unwrap_or(0);
    Trigger {
        key: key.clone(),
        name: Arc::from(key.get(name_at..).unwrap_or(key)),
        data: entry.data.clone(),
        metadata: entry.metadata.clone(),
        scheduled_at: at,
        tick: Some(tick),
        kind,
        execution_id: ExecutionId::for_execution(key, tick, kind),
        attempt,
        created_by: entry.created_by.clone(),
    }
}

/// The report of an attempt cut short by `policy.timeout`.
pub(super) fn timed_out(limit: TimeDelta) -> Report {
    Report {
        timed_out: true,
        error: Some(format!(
            "attempt timed out after {}",
            crate::schedule::duration::format(limit.num_nanoseconds().unwrap_or(i64::MAX))
        )),
        ..Report::from(TriggerResult::Failed)
    }
}
