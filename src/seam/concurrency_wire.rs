//! Concurrency rules and key states on `jobsd.scheduler.v1.Jobs`, to and from the wire.

use crate::jobs::concurrency::{KeyState, Rule};
use crate::proto::jobsd_replica as jsv1;

/// A rule as the wire carries it.
pub fn rule_to_wire(rule: Rule) -> jsv1::ConcurrencyRule {
    jsv1::ConcurrencyRule {
        key: rule.key,
        limit: rule.limit,
    }
}

/// A rule from the wire.
pub fn rule_from_wire(rule: jsv1::ConcurrencyRule) -> Rule {
    Rule {
        key: rule.key,
        limit: rule.limit,
    }
}

/// A key's state as the wire carries it.
pub fn key_to_wire(state: KeyState) -> jsv1::ConcurrencyKeyState {
    let (rule, limit) = state.rule.unwrap_or_default();
    jsv1::ConcurrencyKeyState {
        key: state.key,
        rule,
        limit,
        in_flight: state.in_flight,
        waiting: state.waiting,
    }
}

/// A key's state from the wire.
pub fn key_from_wire(state: jsv1::ConcurrencyKeyState) -> KeyState {
    KeyState {
        key: state.key,
        rule: (!state.rule.is_empty()).then_some((state.rule, state.limit)),
        in_flight: state.in_flight,
        waiting: state.waiting,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_and_keys_survive_the_wire() {
        let rule = Rule {
            key: "t-*".into(),
            limit: 5,
        };
        assert_eq!(rule_from_wire(rule_to_wire(rule.clone())), rule);
        for state in [
            KeyState {
                key: "t-a".into(),
                rule: Some(("t-*".into(), 5)),
                in_flight: 5,
                waiting: 7,
            },
            KeyState {
                key: "free".into(),
                rule: None,
                in_flight: 1,
                waiting: 0,
            },
        ] {
            assert_eq!(key_from_wire(key_to_wire(state.clone())), state);
        }
    }
}
