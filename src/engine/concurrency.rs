//! Concurrency rules by key (see [`crate::jobs::concurrency`]): kept in the store's values
//! table, one record per rule (`concurrencylimit||<owner prefix><key>`, the limit in decimal),
//! and handed to the trigger loop, which enforces them ([`super::runner`]'s gates). A
//! replica that follows the store reads them again every [`RELOAD`], so a rule set through
//! any replica holds on all of them within that time.

use std::collections::HashMap;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::runner::Command;
use super::{Engine, Error};
use crate::jobs::concurrency::{self, ConcurrencyView, Rule, Rules};
use crate::proto::dapr_scheduler as sv1;
use crate::store::{Op, Store};
use crate::trigger::keys;

/// How often a following replica reads the rules again.
pub const RELOAD: Duration = Duration::from_secs(2);

/// The values-table prefix of every rule.
const RULES: &str = "concurrencylimit||";

/// The owner prefix of an app's jobs (`app||<ns>||<app>||`); rules are for app jobs only.
fn owner_of(metadata: &sv1::JobMetadata) -> Result<String, Error> {
    let prefix = keys::name_prefix(keys::check_metadata(Some(metadata))?)?;
    if !keys::is_app_job(&prefix) {
        return Err(Error::BadRequest(
            "concurrency rules are for app jobs (policy.concurrencyKey), not actor reminders"
                .into(),
        ));
    }
    Ok(prefix)
}

/// Every stored rule, by owner prefix.
async fn load(store: &dyn Store) -> Result<HashMap<String, Vec<Rule>>, Error> {
    let mut owners: HashMap<String, Vec<Rule>> = HashMap::new();
    for (key, value) in store.list_values(RULES).await? {
        let Some((owner, rule)) = split(&key) else {
            tracing::warn!(key, "concurrency rule under an unreadable key; ignored");
            continue;
        };
        let Some(limit) = std::str::from_utf8(&value)
            .ok()
            .and_then(|v| v.parse().ok())
        else {
            tracing::warn!(key, "concurrency rule with an unreadable limit; ignored");
            continue;
        };
        owners.entry(owner.to_owned()).or_default().push(Rule {
            key: rule.to_owned(),
            limit,
        });
    }
    Ok(owners)
}

/// `(owner prefix, rule key)` of a rule's values-table key: the owner prefix is
/// `app||<ns>||<app>||` (three separators).
fn split(key: &str) -> Option<(&str, &str)> {
    let rest = key.strip_prefix(RULES)?;
    let mut end = 0;
    for _ in 0..3 {
        end += rest.get(end..)?.find(keys::SEPARATOR)? + keys::SEPARATOR.len();
    }
    Some((&rest[..end], &rest[end..]))
}

impl Engine {
    /// Sets (creates or replaces) a rule of the metadata's owner.
    pub async fn set_concurrency_rule(
        &self,
        metadata: &sv1::JobMetadata,
        rule: Rule,
    ) -> Result<(), Error> {
        concurrency::check_rule(&rule.key, rule.limit).map_err(Error::BadRequest)?;
        let owner = owner_of(metadata)?;
        let op = Op::PutValue {
            key: format!("{RULES}{owner}{}", rule.key),
            value: Some(rule.limit.to_string().into_bytes()),
        };
        self.inner.store.write(vec![op]).await?;
        self.reload_concurrency_rules().await
    }

    /// Deletes a rule of the metadata's owner; whether there was one.
    pub async fn delete_concurrency_rule(
        &self,
        metadata: &sv1::JobMetadata,
        key: &str,
    ) -> Result<bool, Error> {
        let owner = owner_of(metadata)?;
        let full = format!("{RULES}{owner}{key}");
        let existed = self.inner.store.get_value(&full).await?.is_some();
        let op = Op::PutValue {
            key: full,
            value: None,
        };
        self.inner.store.write(vec![op]).await?;
        self.reload_concurrency_rules().await?;
        Ok(existed)
    }

    /// The owner's rules, and the keys its jobs have out or waiting in this engine's loop.
    pub async fn concurrency_view(
        &self,
        metadata: &sv1::JobMetadata,
    ) -> Result<ConcurrencyView, Error> {
        let owner = owner_of(metadata)?;
        let mut rules = load(&*self.inner.store)
            .await?
            .remove(&owner)
            .unwrap_or_default();
        rules.sort_by(|a, b| a.key.cmp(&b.key));
        let keys = match &self.inner.loop_tx {
            Some(tx) => {
                let (reply, answer) = tokio::sync::oneshot::channel();
                match tx.send(Command::KeyStates(owner, reply)) {
                    Ok(()) => answer.await.unwrap_or_default(),
                    Err(_) => Vec::new(),
                }
            }
            None => Vec::new(),
        };
        Ok(ConcurrencyView { rules, keys })
    }

    /// Reads every rule from the store and hands them to the trigger loop.
    pub async fn reload_concurrency_rules(&self) -> Result<(), Error> {
        let owners = load(&*self.inner.store).await?;
        let rules = owners
            .into_iter()
            .map(|(owner, rules)| (owner, Rules::new(rules)))
            .collect();
        if let Some(tx) = &self.inner.loop_tx {
            let _ = tx.send(Command::Gates {
                rules: Some(rules),
                place: None,
            });
        }
        Ok(())
    }

    /// This replica's place among `count` live ones (its share of every limit).
    pub fn set_concurrency_place(&self, count: u32, index: u32) {
        if let Some(tx) = &self.inner.loop_tx {
            let _ = tx.send(Command::Gates {
                rules: None,
                place: Some((count.max(1), index)),
            });
        }
    }

    /// Reads the rules again every [`RELOAD`] until `stop` (a replica following a shared
    /// store: rules set through other replicas).
    pub(super) fn reload_rules_until(&self, stop: CancellationToken) {
        let engine = self.clone();
        tokio::spawn(async move {
            loop {
                if let Err(e) = engine.reload_concurrency_rules().await {
                    tracing::warn!(error = %e, "reading the concurrency rules failed");
                }
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(RELOAD) => {}
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_keys_split_after_the_owner() {
        assert_eq!(
            split("concurrencylimit||app||ns||a||tenant-*"),
            Some(("app||ns||a||", "tenant-*"))
        );
        assert_eq!(
            split("concurrencylimit||app||ns||a||x||y"),
            Some(("app||ns||a||", "x||y"))
        );
        assert_eq!(split("concurrencylimit||app||ns"), None);
    }
}
