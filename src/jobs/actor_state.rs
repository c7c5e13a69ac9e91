//! Actor state as the sidecar hands it to a scheduler that keeps it (daprd keeps it in an
//! actor state store; jobsd keeps it beside the jobs): whose state, what one transaction
//! changes, and the bounds of one transaction.

/// Most changes one transaction makes: every change of a transaction is written in one
/// commit, and an etcd txn takes 128 keys by default.
pub const MAX_STATE_CHANGES: usize = 100;

/// Most bytes (keys and values) one transaction writes: etcd takes 1.5 MiB per request by
/// default, and a transaction is one request.
pub const MAX_STATE_BYTES: usize = 1024 * 1024;

/// The actor whose state is read or written: daprd keys it by the app, the actor type and
/// id (`<app>||<type>||<id>||<key>`); jobsd adds the namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActorStateOwner {
    /// The sidecar's namespace.
    pub namespace: String,
    /// The app hosting the actor type.
    pub app_id: String,
    /// The actor type.
    pub actor_type: String,
    /// The actor id.
    pub actor_id: String,
}

/// One change of a transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateChange {
    /// Stores `value` under `key` (what a later get answers, byte for byte).
    Upsert {
        /// The state key.
        key: String,
        /// The bytes stored.
        value: Vec<u8>,
    },
    /// Removes `key`.
    Delete {
        /// The state key.
        key: String,
    },
}

impl StateChange {
    /// The state key it changes.
    pub fn key(&self) -> &str {
        match self {
            StateChange::Upsert { key, .. } | StateChange::Delete { key } => key,
        }
    }

    /// Bytes it writes (key and value).
    pub fn size(&self) -> usize {
        match self {
            StateChange::Upsert { key, value } => key.len() + value.len(),
            StateChange::Delete { key } => key.len(),
        }
    }
}

/// Why a transaction is too large to be written at once; `None` when it fits. The first
/// text is daprd's (`state.ErrTransactionsTooManyOperations`).
pub fn too_large(changes: &[StateChange]) -> Option<String> {
    if changes.len() > MAX_STATE_CHANGES {
        return Some(
            "the transaction contains more operations than supported by the state store".into(),
        );
    }
    let bytes: usize = changes.iter().map(StateChange::size).sum();
    (bytes > MAX_STATE_BYTES).then(|| {
        format!(
            "the transaction writes {bytes} bytes, more than the {MAX_STATE_BYTES} the state \
             store takes in one transaction"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upsert(key: &str, len: usize) -> StateChange {
        StateChange::Upsert {
            key: key.into(),
            value: vec![b'x'; len],
        }
    }

    #[test]
    fn a_transaction_is_bounded_in_changes_and_bytes() {
        let fits: Vec<_> = (0..MAX_STATE_CHANGES)
            .map(|i| upsert(&i.to_string(), 1))
            .collect();
        assert_eq!(too_large(&fits), None);
        let mut many = fits.clone();
        many.push(StateChange::Delete { key: "k".into() });
        assert_eq!(
            too_large(&many).as_deref(),
            Some("the transaction contains more operations than supported by the state store")
        );
        let big = [upsert("k", MAX_STATE_BYTES)];
        assert!(too_large(&big).unwrap().contains("1048577 bytes"));
        assert_eq!(too_large(&[upsert("k", MAX_STATE_BYTES - 1)]), None);
    }
}
