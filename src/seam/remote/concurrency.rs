//! Concurrency rules through the replicas (`jobsd.scheduler.v1.Jobs`): a rule is set or
//! deleted on any replica (the store is shared; the others read it within 2 s); the keys out
//! and waiting are summed over every replica, each counted once. A Dapr Scheduler has no such
//! calls (`Unimplemented`), refused as the embedded-only features are.

use std::collections::{BTreeMap, HashSet};

use futures_util::FutureExt;

use super::{Remote, jobsd_client};
use crate::jobs::concurrency::{ConcurrencyView, KeyState, Rule};
use crate::proto::dapr_scheduler as sv1;
use crate::proto::jobsd_replica as jsv1;
use crate::seam::concurrency_wire::{key_from_wire, rule_from_wire, rule_to_wire};
use crate::seam::{Concurrency, Error};

/// A Dapr Scheduler answers `Unimplemented`: refused as a scheduler without the capability.
fn unless_served(err: Error) -> Error {
    if err.code == tonic::Code::Unimplemented {
        return Error::new(
            tonic::Code::FailedPrecondition,
            "concurrency limits by key (policy.concurrencyKey) need jobsd's scheduler: the \
             replicas at --scheduler-host-address do not serve them (a Dapr Scheduler has none)",
        );
    }
    err
}

#[async_trait::async_trait]
impl Concurrency for Remote {
    async fn set_concurrency_rule(
        &self,
        metadata: sv1::JobMetadata,
        rule: Rule,
    ) -> Result<(), Error> {
        let req = jsv1::SetConcurrencyRuleRequest {
            metadata: Some(metadata),
            rule: Some(rule_to_wire(rule)),
        };
        self.call(req, |ch, r| {
            async move { jobsd_client(ch).set_concurrency_rule(r).await }.boxed()
        })
        .await
        .map_err(unless_served)?;
        Ok(())
    }

    async fn delete_concurrency_rule(
        &self,
        metadata: sv1::JobMetadata,
        key: String,
    ) -> Result<bool, Error> {
        let req = jsv1::DeleteConcurrencyRuleRequest {
            metadata: Some(metadata),
            key,
        };
        let answer = self
            .call(req, |ch, r| {
                async move { jobsd_client(ch).delete_concurrency_rule(r).await }.boxed()
            })
            .await
            .map_err(unless_served)?;
        Ok(answer.existed)
    }

    async fn concurrency_view(&self, metadata: sv1::JobMetadata) -> Result<ConcurrencyView, Error> {
        let req = jsv1::GetConcurrencyRequest {
            metadata: Some(metadata),
        };
        let replicas = self.shared.hosts.borrow().hosts.len().max(1);
        let mut seen = HashSet::new();
        let mut rules = Vec::new();
        let mut keys: BTreeMap<String, KeyState> = BTreeMap::new();
        for offset in 0..replicas {
            let answer = self
                .call_on(offset, req.clone(), |ch, r| {
                    async move { jobsd_client(ch).get_concurrency(r).await }.boxed()
                })
                .await
                .map_err(unless_served)?;
            // A replica that could not be reached was stood in for by the next one.
            if !seen.insert(answer.replica) {
                continue;
            }
            rules = answer.rules.into_iter().map(rule_from_wire).collect();
            for state in answer.keys.into_iter().map(key_from_wire) {
                let sum = keys.entry(state.key.clone()).or_insert(KeyState {
                    in_flight: 0,
                    waiting: 0,
                    ..state.clone()
                });
                sum.in_flight += state.in_flight;
                sum.waiting += state.waiting;
            }
        }
        Ok(ConcurrencyView {
            rules,
            keys: keys.into_values().collect(),
        })
    }
}
