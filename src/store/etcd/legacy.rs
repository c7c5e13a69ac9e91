//! jobsd's own keys (history, idempotency records, the partition index) lived under
//! `<ns>/jobsd/` until they moved to `<ns>/x-jobsd/` ([`OWN`](keys::OWN)): `dapr/jobsd/…`
//! falls under the prefix `dapr/jobs`, which Dapr's tools and tests list as the Scheduler's
//! jobs. A replica moves what an older jobsd left there when it starts, so no history is lost
//! on upgrade.

use super::client::{self, CompareWith, RangeRequest, prefix_end};
use super::keys;
use super::{Error, Etcd};

/// Keys read per page while moving.
const PAGE: i64 = 256;

impl Etcd {
    /// Moves every key under `<ns>/jobsd/` to the same name under `<ns>/x-jobsd/` (value and
    /// lease kept), one txn per key that holds only if the key was not changed meanwhile, so
    /// replicas starting together move each key once. Returns how many this call moved.
    pub async fn move_legacy_keys(&self) -> Result<u64, Error> {
        let old = keys::legacy_own_prefix(&self.inner.namespace);
        let new = keys::own_prefix(&self.inner.namespace);
        let mut moved = 0;
        loop {
            let page = self
                .inner
                .retrying(|etcd| {
                    let request = RangeRequest {
                        key: old.clone().into_bytes(),
                        range_end: prefix_end(old.as_bytes()),
                        limit: PAGE,
                        ..RangeRequest::default()
                    };
                    async move { etcd.range(request).await }
                })
                .await?;
            if page.kvs.is_empty() {
                return Ok(moved);
            }
            for kv in page.kvs {
                let renamed = [new.as_bytes(), &kv.key[old.len()..]].concat();
                let request = client::txn(
                    vec![client::equal(
                        kv.key.clone(),
                        CompareWith::ModRevision(kv.mod_revision),
                    )],
                    vec![
                        client::put(renamed, kv.value.clone(), kv.lease),
                        client::delete(kv.key.clone()),
                    ],
                    vec![],
                );
                let answer = self
                    .inner
                    .retrying(|etcd| {
                        let request = request.clone();
                        async move { etcd.txn(request).await }
                    })
                    .await?;
                if answer.succeeded {
                    moved += 1;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{fresh_namespace, shared};
    use super::*;

    #[tokio::test]
    async fn keys_an_older_jobsd_left_move_to_the_new_segment_once() {
        let server = shared();
        let ns = fresh_namespace();
        let etcd = Etcd::connect(&[server.endpoint()], &ns).await.unwrap();
        let raw = client::Client::connect_with(&[server.endpoint()], None).unwrap();
        raw.put(format!("{ns}/jobsd/runs/k\0a"), "run")
            .await
            .unwrap();
        raw.put(format!("{ns}/jobsd/finished/k"), "done")
            .await
            .unwrap();
        raw.put(format!("{ns}/jobs/app||a||b||k"), "job")
            .await
            .unwrap();

        assert_eq!(etcd.move_legacy_keys().await.unwrap(), 2);
        assert_eq!(etcd.move_legacy_keys().await.unwrap(), 0, "moved once");
        let all = raw
            .range(RangeRequest {
                key: format!("{ns}/").into_bytes(),
                range_end: prefix_end(format!("{ns}/").as_bytes()),
                ..RangeRequest::default()
            })
            .await
            .unwrap();
        let keys: Vec<String> = all
            .kvs
            .iter()
            .map(|kv| String::from_utf8_lossy(&kv.key).into_owned())
            .collect();
        assert_eq!(
            keys,
            [
                format!("{ns}/jobs/app||a||b||k"),
                format!("{ns}/x-jobsd/finished/k"),
                format!("{ns}/x-jobsd/runs/k\0a"),
            ]
        );
        assert_eq!(all.kvs[2].value, b"run");
    }
}
