//! Results on their way to the store: gathered into batches, written one batch (one commit)
//! at a time, and reported back so that next ticks are queued only once durable.

use super::*;

impl Runner {
    /// Adds a result to the next batch written.
    pub(super) fn push_result(&mut self, result: Persisted) {
        if self.pending.is_empty() {
            self.pending_since = Some(Instant::now());
        }
        let mut result = result;
        result.incarnation = self.jobs.get(&result.key).map_or(0, |e| e.incarnation);
        if result.run.is_some() && result.lease.is_none() {
            // The run of a held execution's end: it also releases the hold.
            result.lease = self.ending.take();
        }
        self.pending.push(result);
    }

    /// Writes `ops` without waiting for them (deletes of jobs that cannot fire again).
    pub(super) fn write_detached(&self, ops: Vec<Op>) {
        let store = self.store.clone();
        tokio::spawn(async move {
            if let Err(e) = store.write(ops).await {
                tracing::error!(error = %e, "a background store write failed");
            }
        });
    }

    /// Writes the pending results now if that is the best time, otherwise gives the instant
    /// by which they must be written.
    ///
    /// One batch is written at a time: results answered meanwhile wait for it (a store commit
    /// costs about as much for one result as for hundreds). Without a write out, they are
    /// written once [`FLUSH_BATCH`] have gathered, once the oldest has waited [`FLUSH_DELAY`],
    /// or at once when no other answer can come before that (nothing is at the sink and
    /// nothing falls due meanwhile), so a quiet loop never holds results back.
    pub(super) fn flush(&mut self) -> Option<Instant> {
        if self.writing || self.pending.is_empty() {
            return None;
        }
        let since = self.pending_since.unwrap_or_else(Instant::now);
        let deadline = since + FLUSH_DELAY;
        let quiet = self.in_sink == 0
            && self.jobs.next_due().is_none_or(|at| {
                at.signed_duration_since(self.clock.now())
                    .to_std()
                    .is_ok_and(|d| d > FLUSH_DELAY)
            });
        if quiet || self.pending.len() >= FLUSH_BATCH || Instant::now() >= deadline {
            self.write_pending();
            None
        } else {
            Some(deadline)
        }
    }

    /// Writes the pending results in one store request (one commit), then reports them back
    /// so the next ticks are queued only once they are durable.
    pub(super) fn write_pending(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        self.pending_since = None;
        let mut batch = std::mem::take(&mut self.pending);
        let now = self.clock.now();
        let ops = batch
            .iter_mut()
            .map(|p| {
                if let Some(op) = async_completion::lease_only_op(p) {
                    return op;
                }
                let mut op = match (p.run.take(), p.next) {
                    (None, _) if p.by_hand.is_some() => Op::SetPaused {
                        key: p.key.to_string(),
                        generation: p.generation,
                        paused: p.by_hand.as_ref().and_then(|b| b.paused.clone()),
                    },
                    (Some(run), next) => Recorded {
                        key: &p.key,
                        generation: p.generation,
                        progress: (!p.record_only).then_some(&p.counter),
                        due: next.map(convert::due_ms),
                        // A resume whose job can fire no more is finished once applied, as at
                        // load.
                        finish: next.is_none()
                            && !p.waits
                            && !p.record_only
                            && !p.detached
                            && p.by_hand.is_none(),
                        dropped: p.dropped,
                        run,
                        skipped_ticks: p.skipped_ticks,
                        pause: p.pause.clone(),
                        dead_letter: p.dead_letter.as_ref().map(|d| d.record.clone()),
                        resume: p.by_hand.as_ref().is_some_and(|b| b.paused.is_none()),
                    }
                    .op(&self.history, now),
                    (None, Some(next)) => Op::PutCounter {
                        key: p.key.to_string(),
                        counter: crate::store::StoredCounter {
                            due_ms: Some(convert::due_ms(next)),
                            ..convert::stored_counter(&p.counter, p.generation)
                        },
                    },
                    (None, None) if p.waits => Op::PutCounter {
                        key: p.key.to_string(),
                        counter: convert::stored_counter(&p.counter, p.generation),
                    },
                    (None, None) => Op::FinishJob {
                        key: p.key.to_string(),
                        generation: p.generation,
                    },
                };
                async_completion::release_with(p, &mut op);
                p.indexed = match &op {
                    Op::PutCounter { counter, .. } => counter.due_ms.is_some(),
                    Op::RecordResult(record) => {
                        record.progress.as_ref().is_some_and(|c| c.due_ms.is_some())
                    }
                    _ => false,
                };
                op
            })
            .collect();
        let store = self.store.clone();
        let tx = self.tx.clone();
        self.writing = true;
        tokio::spawn(async move {
            match store.write(ops).await {
                Ok(results) => {
                    for (r, p) in results.iter().zip(&mut batch) {
                        if *r == OpResult::Skipped {
                            tracing::debug!(key = %p.key, "job changed while its result was written");
                        }
                        p.written = Some(Ok(*r));
                    }
                }
                Err(e) => {
                    // The in-memory progress still moves on: the tick was delivered. After a
                    // restart it may be delivered again (at least once).
                    tracing::error!(error = %e, "could not persist trigger results");
                    for p in &mut batch {
                        p.written = Some(Err(e.clone()));
                    }
                }
            }
            let _ = tx.send(Command::Persisted(batch));
        });
    }
}
