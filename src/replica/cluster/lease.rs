//! One etcd lease kept alive in the background, and whether it can still be trusted.
//!
//! An etcd keep-alive stream dies with its connection and does not come back; this keeper
//! opens a new one after any error. The lease counts as alive only while the last
//! renewal is recent enough that etcd cannot have expired it yet: past that point another
//! replica may already own what the lease held, so the holder must stop acting on it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::store::etcd::client::{Client, is_lease_not_found};

/// Pause before a new keep-alive stream after an error.
const RECONNECT: Duration = Duration::from_millis(200);

/// A granted lease and its keeper task.
pub struct Lease {
    /// etcd's lease id.
    id: i64,
    /// The TTL etcd granted.
    ttl: Duration,
    /// What the keeper reports.
    state: Arc<State>,
    /// Stops the keeper.
    stop: CancellationToken,
    /// The keeper.
    task: JoinHandle<()>,
}

/// Whether this replica holds a lease etcd cannot have expired yet, for whoever must not act
/// without one: the trigger sink asks before every delivery, so a replica that was paused past
/// its lease (SIGSTOP, a VM freeze) fires nothing in the moment between waking up and its
/// member loop letting go of the partitions other replicas have taken meanwhile.
#[derive(Clone, Default)]
pub struct Standing(Arc<std::sync::Mutex<Option<Held>>>);

/// The lease a [`Standing`] follows: the keeper's state and the TTL etcd granted.
type Held = (Arc<State>, Duration);

impl Standing {
    /// Whether the current lease (if any) is certainly still alive.
    pub fn holds(&self) -> bool {
        match &*self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
        {
            Some((state, ttl)) => state.alive(*ttl),
            None => false,
        }
    }

    /// Follows `lease` from now on (`None`: no lease, so nothing may fire).
    pub fn set(&self, lease: Option<&Lease>) {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) =
            lease.map(|l| (l.state.clone(), l.ttl));
    }
}

/// The keeper's view of the lease.
struct State {
    /// When etcd last confirmed the lease (or granted it).
    renewed: std::sync::Mutex<Instant>,
    /// etcd said the lease is gone, or it went unrenewed too long: it is not trusted again.
    expired: AtomicBool,
}

impl Lease {
    /// Grants a lease of `ttl` (whole seconds, at least 1) and keeps it alive.
    pub async fn grant(client: &Client, ttl: Duration) -> Result<Lease, tonic::Status> {
        let secs = i64::try_from(ttl.as_millis().div_ceil(1000))
            .unwrap_or(i64::MAX)
            .max(1);
        // etcd's TTL runs from when it got the request, at the latest: count from the asking.
        let asked = Instant::now();
        let (id, granted_ttl) = client.lease_grant(secs).await?;
        let ttl = Duration::from_secs(u64::try_from(granted_ttl.max(1)).unwrap_or(1));
        let state = Arc::new(State {
            renewed: std::sync::Mutex::new(asked),
            expired: AtomicBool::new(false),
        });
        let stop = CancellationToken::new();
        let task = tokio::spawn(keep_alive(
            client.clone(),
            id,
            ttl,
            state.clone(),
            stop.clone(),
        ));
        Ok(Lease {
            id,
            ttl,
            state,
            stop,
            task,
        })
    }

    /// etcd's id of the lease.
    pub fn id(&self) -> i64 {
        self.id
    }

    /// Whether the lease certainly still exists: etcd has not said it expired, and it renewed
    /// it less than two thirds of the TTL ago (a renewal is due every third).
    pub fn alive(&self) -> bool {
        self.state.alive(self.ttl)
    }

    /// Stops renewing and revokes the lease, which deletes every key attached to it at once.
    /// `false` if etcd could not be told (the lease then expires on its own; [`revoke_id`]
    /// can try again later).
    pub async fn revoke(mut self, client: &Client) -> bool {
        self.stop.cancel();
        let task = std::mem::replace(&mut self.task, tokio::spawn(async {}));
        let _ = task.await;
        revoke_id(client, self.id).await
    }
}

/// Revokes lease `id` (bounded wait); `true` once etcd no longer has it.
pub async fn revoke_id(client: &Client, id: i64) -> bool {
    match tokio::time::timeout(Duration::from_secs(2), client.lease_revoke(id)).await {
        Ok(Ok(())) => true,
        // Already expired or revoked.
        Ok(Err(status)) if is_lease_not_found(&status) => true,
        Ok(Err(e)) => {
            tracing::debug!(lease = id, error = %e, "could not revoke the cluster lease");
            false
        }
        Err(_) => false,
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl State {
    /// See [`Lease::alive`]. Once false, false for good: a late renewal must not reopen the
    /// gate on triggers staged meanwhile, which only letting go of the partitions drops.
    fn alive(&self, ttl: Duration) -> bool {
        if self.expired.load(Ordering::Acquire) {
            return false;
        }
        let renewed = *self
            .renewed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if renewed.elapsed() < ttl * 2 / 3 {
            return true;
        }
        self.expired.store(true, Ordering::Release);
        false
    }
}

/// Renews the lease every third of its TTL, over a new stream after any error, until told to
/// stop or etcd says the lease is gone.
async fn keep_alive(
    client: Client,
    id: i64,
    ttl: Duration,
    state: Arc<State>,
    stop: CancellationToken,
) {
    let every = (ttl / 3).max(Duration::from_millis(100));
    loop {
        let opened = tokio::select! {
            () = stop.cancelled() => return,
            opened = tokio::time::timeout(every, client.lease_keep_alive(id)) => opened,
        };
        if let Ok(Ok(mut stream)) = opened {
            // Opening the stream sent the first renewal; each answer counts from when its own
            // request was sent (`message` pairs them), so neither a slow network to etcd nor a
            // pause of this process (an answer read long after it came) can stretch the lease
            // past what etcd granted.
            loop {
                let answer = tokio::select! {
                    () = stop.cancelled() => return,
                    answer = tokio::time::timeout(every, stream.message()) => answer,
                };
                match answer {
                    Ok(Ok(Some((resp, asked)))) if resp.ttl > 0 => {
                        let mut renewed = state
                            .renewed
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner);
                        *renewed = (*renewed).max(asked);
                    }
                    Ok(Ok(Some(_))) => {
                        tracing::warn!(lease = id, "cluster lease expired");
                        state.expired.store(true, Ordering::Release);
                        return;
                    }
                    _ => break,
                }
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(every) => {}
                }
                if stream.keep_alive().await.is_err() {
                    break;
                }
            }
        }
        tracing::debug!(lease = id, "lease keep-alive stream lost; reopening");
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(RECONNECT) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn standing_at(renewed: Instant, ttl: Duration) -> (Standing, Arc<State>) {
        let state = Arc::new(State {
            renewed: std::sync::Mutex::new(renewed),
            expired: AtomicBool::new(false),
        });
        let standing = Standing::default();
        *standing.0.lock().unwrap() = Some((state.clone(), ttl));
        (standing, state)
    }

    /// A replica that wakes up past two thirds of its TTL (SIGSTOP, a frozen VM) must not fire,
    /// even if a late renewal answer arrives before its member loop lets go of the partitions.
    #[test]
    fn a_lease_unrenewed_too_long_stays_untrusted_after_a_late_renewal() {
        let ttl = Duration::from_secs(3);
        let (fresh, _) = standing_at(Instant::now(), ttl);
        assert!(fresh.holds());
        let (woken, state) = standing_at(Instant::now() - Duration::from_secs(7), ttl);
        assert!(!woken.holds());
        *state.renewed.lock().unwrap() = Instant::now();
        assert!(!woken.holds(), "a late renewal reopened the gate");
        assert!(!Standing::default().holds(), "no lease: nothing may fire");
    }

    /// A process paused past its lease (SIGSTOP, a frozen VM) must not take the answer etcd
    /// sent just before the pause, read after it, for a renewal made after it. (In CI a replica
    /// woken from SIGSTOP fired 11 one-shots another replica had already delivered: each answer
    /// was counted from the time of the request after it.)
    #[tokio::test(flavor = "current_thread")]
    async fn an_answer_read_after_a_pause_renews_from_when_it_was_asked() {
        let client = Client::connect(&[crate::store::etcd::testing::shared().endpoint()])
            .expect("etcd client");
        let lease = Lease::grant(&client, Duration::from_secs(2))
            .await
            .expect("lease granted");
        let standing = Standing::default();
        standing.set(Some(&lease));
        // Past its TTL: only the keeper's renewals keep it trusted.
        tokio::time::sleep(lease.ttl + Duration::from_millis(500)).await;
        assert!(standing.holds(), "a lease kept alive was not trusted");

        // The whole process stops (this runtime has one thread); etcd goes on and expires
        // the lease. The keeper's last answer waits in the socket.
        std::thread::sleep(lease.ttl + Duration::from_secs(2));
        // Awake: the keeper reads what came meanwhile; the gate is asked a moment later, as
        // the member loop or a trigger would.
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            matches!(client.lease_revoke(lease.id).await, Err(s) if is_lease_not_found(&s)),
            "etcd still holds the lease: the pause was too short to test anything"
        );
        assert!(
            !standing.holds(),
            "a lease etcd had expired was trusted after the pause"
        );
    }
}
