//! Concurrency limits by key, for app jobs on jobsd's route: a job names a key in
//! `policy.concurrencyKey` (a tenant, say); a rule sets how many executions of the owner's
//! jobs naming that key may be out at once, for one key (`tenant-a`) or for every key with a
//! prefix (`tenant-*`, each such key on its own). An exact rule wins over prefixes, and the
//! longest prefix over shorter ones; a key no rule covers has no limit. With several
//! scheduler replicas, each enforces its share of a limit ([`share`]), so the limit holds
//! cluster-wide.

use std::collections::HashMap;

/// Largest limit a rule may set.
pub const MAX_LIMIT: u32 = 1_000_000;

/// Longest rule key (bytes), as [`crate::schedule`]'s longest concurrency key plus the `*`.
pub const MAX_RULE_KEY: usize = 257;

/// One rule: `key` (a prefix when it ends with `*`) and its limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// A concurrency key, or a prefix followed by `*`.
    pub key: String,
    /// Executions out at once, 1 or more.
    pub limit: u32,
}

impl Rule {
    /// The prefix of a prefix rule (`None` for an exact one).
    pub fn prefix(&self) -> Option<&str> {
        self.key.strip_suffix('*')
    }
}

/// Checks a rule as the API takes it; the error names the field.
pub fn check_rule(key: &str, limit: u32) -> Result<(), String> {
    if key.is_empty() {
        return Err("key: empty (a concurrency key, or a prefix followed by *)".into());
    }
    if key.len() > MAX_RULE_KEY {
        return Err(format!(
            "key: {} bytes, more than {MAX_RULE_KEY}",
            key.len()
        ));
    }
    if limit == 0 || limit > MAX_LIMIT {
        return Err(format!("limit: {limit} is not between 1 and {MAX_LIMIT}"));
    }
    Ok(())
}

/// One owner's rules, ready to resolve keys.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rules {
    exact: HashMap<String, u32>,
    /// Prefix rules, longest prefix first.
    prefixes: Vec<(String, u32)>,
}

impl Rules {
    /// The rules of `rules` (a later rule of the same key replaces an earlier one).
    pub fn new(rules: impl IntoIterator<Item = Rule>) -> Self {
        let mut out = Rules::default();
        for rule in rules {
            match rule.prefix() {
                Some(prefix) => {
                    out.prefixes.retain(|(p, _)| p != prefix);
                    out.prefixes.push((prefix.to_owned(), rule.limit));
                }
                None => {
                    out.exact.insert(rule.key, rule.limit);
                }
            }
        }
        out.prefixes
            .sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.0.cmp(&b.0)));
        out
    }

    /// The rule that covers `key` (as written, `*` included) and its limit.
    pub fn resolve(&self, key: &str) -> Option<(String, u32)> {
        if let Some(limit) = self.exact.get(key) {
            return Some((key.to_owned(), *limit));
        }
        self.prefixes
            .iter()
            .find(|(p, _)| key.starts_with(p.as_str()))
            .map(|(p, limit)| (format!("{p}*"), *limit))
    }

    /// Whether there is no rule.
    pub fn is_empty(&self) -> bool {
        self.exact.is_empty() && self.prefixes.is_empty()
    }
}

/// The share of a cluster-wide `global` limit the replica at `index` of `count` enforces
/// (Dapr's `localLimitFromGlobal`): `global / count`, one more for the first
/// `global % count` replicas, and at least 1 (a limit below the replica count is then
/// exceeded rather than starved).
pub fn share(global: u32, count: u32, index: u32) -> u32 {
    if count <= 1 {
        return global;
    }
    let base = global / count;
    if base < 1 {
        return 1;
    }
    if index < global % count {
        base + 1
    } else {
        base
    }
}

/// One concurrency key as a scheduler sees it now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyState {
    /// The key.
    pub key: String,
    /// The rule that covers it and its (cluster-wide) limit; `None`: no limit.
    pub rule: Option<(String, u32)>,
    /// Executions out now.
    pub in_flight: u32,
    /// Due executions waiting for a slot.
    pub waiting: u32,
}

/// An owner's rules and the keys its scheduler has seen.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConcurrencyView {
    /// The rules, in key order.
    pub rules: Vec<Rule>,
    /// Keys with executions out or waiting, in key order.
    pub keys: Vec<KeyState>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(key: &str, limit: u32) -> Rule {
        Rule {
            key: key.into(),
            limit,
        }
    }

    #[test]
    fn exact_rules_win_then_the_longest_prefix() {
        let rules = Rules::new([
            rule("t-*", 5),
            rule("t-big-*", 50),
            rule("t-a", 1),
            rule("*", 100),
        ]);
        assert_eq!(rules.resolve("t-a"), Some(("t-a".into(), 1)));
        assert_eq!(rules.resolve("t-b"), Some(("t-*".into(), 5)));
        assert_eq!(rules.resolve("t-big-1"), Some(("t-big-*".into(), 50)));
        assert_eq!(rules.resolve("other"), Some(("*".into(), 100)));
        assert_eq!(Rules::new([rule("t-*", 5)]).resolve("u"), None);
        // A later rule of the same key replaces the earlier one.
        assert_eq!(
            Rules::new([rule("k", 1), rule("k", 3)]).resolve("k"),
            Some(("k".into(), 3))
        );
    }

    #[test]
    fn a_limit_is_shared_as_dapr_shares_it() {
        assert_eq!(share(10, 1, 0), 10);
        assert_eq!(
            (0..3).map(|i| share(10, 3, i)).collect::<Vec<_>>(),
            [4, 3, 3]
        );
        assert_eq!(
            (0..3).map(|i| share(2, 3, i)).collect::<Vec<_>>(),
            [1, 1, 1]
        );
        assert_eq!((0..3).map(|i| share(3, 3, i)).sum::<u32>(), 3);
    }

    #[test]
    fn rules_are_checked() {
        assert!(check_rule("k", 1).is_ok());
        assert!(check_rule("", 1).unwrap_err().starts_with("key:"));
        assert!(check_rule("k", 0).unwrap_err().starts_with("limit:"));
        assert!(
            check_rule(&"k".repeat(300), 1)
                .unwrap_err()
                .starts_with("key:")
        );
    }
}
