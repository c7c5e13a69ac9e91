//! Members of one cluster on a real etcd (Debian's `etcd-server`), in real time: every job
//! fires on exactly one member, and a member's share moves when it leaves or dies.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::clock::SystemClock;
use crate::proto::dapr_scheduler as sv1;
use crate::proto::dapr_scheduler::job_target_metadata::Type as Target;
use crate::store::etcd::testing;
use crate::trigger::{Sink, Trigger, TriggerResult};

/// Lease TTL of the test members (etcd may round it up).
const TTL: Duration = Duration::from_secs(2);
/// Upper bound for anything to happen.
const PATIENCE: Duration = Duration::from_secs(20);
/// Partitions of the test clusters (their stores index jobs by as many).
const PARTITIONS: u32 = 16;

/// One delivery: which member, and the nominal time of the tick.
type Delivery = (usize, chrono::DateTime<chrono::Utc>);

/// Deliveries seen by every member: job name → deliveries in arrival order.
#[derive(Default)]
struct Log(Mutex<HashMap<String, Vec<Delivery>>>, Mutex<Vec<Attempted>>);

/// One attempt of a `fail-*` job (which every member fails): member, execution id, nominal
/// tick and attempt number, as the trigger carried them.
type Attempted = (
    usize,
    crate::trigger::ExecutionId,
    Option<chrono::DateTime<chrono::Utc>>,
    u32,
);

impl Log {
    fn count(&self, name: &str) -> usize {
        self.0.lock().unwrap().get(name).map_or(0, Vec::len)
    }
    fn snapshot(&self) -> HashMap<String, Vec<Delivery>> {
        self.0.lock().unwrap().clone()
    }
    /// Every job's last delivered tick is at most 1.5 s old: missed ticks (replayed one after
    /// the other after a takeover) are caught up.
    fn caught_up(&self, names: &[String]) -> bool {
        let recent = chrono::Utc::now() - chrono::TimeDelta::milliseconds(1500);
        let log = self.0.lock().unwrap();
        names.iter().all(|n| {
            log.get(n)
                .and_then(|d| d.last())
                .is_some_and(|(_, at)| *at >= recent)
        })
    }
}

/// A member's sink: records and acks.
struct Recorder {
    member: usize,
    log: Arc<Log>,
}

#[async_trait::async_trait]
impl Sink for Recorder {
    async fn deliver(&self, trigger: Trigger) -> TriggerResult {
        self.log
            .0
            .lock()
            .unwrap()
            .entry(trigger.name.to_string())
            .or_default()
            .push((self.member, trigger.scheduled_at));
        if trigger.name.starts_with("fail-") {
            self.log.1.lock().unwrap().push((
                self.member,
                trigger.execution_id,
                trigger.tick,
                trigger.attempt,
            ));
            return TriggerResult::Failed;
        }
        TriggerResult::Success
    }
    fn is_deliverable(&self, _key: &str) -> bool {
        true
    }
}

struct Node {
    engine: Engine,
    cluster: Option<Cluster>,
    engine_stop: CancellationToken,
    hosts: watch::Receiver<Vec<String>>,
    store: Arc<Etcd>,
}

async fn node(member: usize, namespace: &str, log: &Arc<Log>) -> Node {
    node_on(testing::shared().endpoint(), member, namespace, log).await
}

async fn node_on(endpoint: String, member: usize, namespace: &str, log: &Arc<Log>) -> Node {
    node_with(endpoint, member, namespace, log, None).await
}

/// A member keeping jobs due past `horizon` out of memory.
async fn node_with(
    endpoint: String,
    member: usize,
    namespace: &str,
    log: &Arc<Log>,
    horizon: Option<Duration>,
) -> Node {
    let store = Arc::new(
        Etcd::connect_partitioned(&[endpoint], namespace, None, PARTITIONS)
            .await
            .unwrap(),
    );
    let engine_stop = CancellationToken::new();
    let sink = Arc::new(Recorder {
        member,
        log: log.clone(),
    });
    let (engine, _task) = Engine::follow(
        store.clone(),
        Arc::new(SystemClock),
        sink,
        engine_stop.clone(),
    );
    let (hosts, rx) = watch::channel(Vec::new());
    let cluster = Cluster::start(
        ClusterConfig {
            id: format!("s{member}"),
            address: format!("127.0.0.1:{}", 50_000 + member),
            lease_ttl: TTL,
            partitions: PARTITIONS,
            namespace: namespace.to_owned(),
            horizon,
        },
        store.clone(),
        engine.clone(),
        hosts,
    );
    Node {
        engine,
        cluster: Some(cluster),
        engine_stop,
        hosts: rx,
        store,
    }
}

fn request(name: &str, job: sv1::Job) -> sv1::ScheduleJobRequest {
    sv1::ScheduleJobRequest {
        name: name.into(),
        job: Some(job),
        metadata: Some(sv1::JobMetadata {
            app_id: "myapp".into(),
            namespace: "default".into(),
            target: Some(sv1::JobTargetMetadata {
                r#type: Some(Target::Job(sv1::TargetJob {})),
            }),
            concurrency_key: None,
        }),
        overwrite: false,
    }
}

async fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until the one-shot jobs `names` (of `myapp`) are finished: gone from etcd (their
/// last result deletes them) and nothing out at any member. A duplicate delivery would have
/// come before that: no member holds them any more.
async fn finished(nodes: &[&Node], names: &[&str]) {
    let metadata = request("x", sv1::Job::default()).metadata.unwrap();
    let deadline = Instant::now() + PATIENCE;
    loop {
        let mut done = true;
        for name in names {
            let key = crate::trigger::keys::job_key(&metadata, name).unwrap();
            done &= crate::store::Store::get_job(&*nodes[0].store, &key)
                .await
                .unwrap()
                .is_none();
        }
        for node in nodes {
            done &= node.engine.sync().await.is_some_and(|s| s.outstanding == 0);
        }
        if done {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {names:?} to finish"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Once missed ticks are caught up, each job fires about once a second, each tick once, on
/// one member. A partition may change hands meanwhile (members coming back after an outage
/// rebalance a round or two apart), but never fires on two members at once: a tick fired
/// twice fails at once, while a window with a handover in it is looked at again (up to
/// [`WINDOWS`] times) until the cluster is steady.
async fn once_per_tick(log: &Log, names: &[String]) {
    wait_for("missed ticks to be caught up", || log.caught_up(names)).await;
    let mut unsteady = String::new();
    for _ in 0..WINDOWS {
        let start = log.snapshot();
        tokio::time::sleep(Duration::from_secs(3)).await;
        let end = log.snapshot();
        unsteady.clear();
        for name in names {
            let new = &end[name][start[name].len()..];
            let ticks: std::collections::BTreeSet<_> = new.iter().map(|(_, at)| at).collect();
            assert_eq!(
                ticks.len(),
                new.len(),
                "{name}: a tick fired twice: {new:?}"
            );
            let members: std::collections::BTreeSet<usize> = new.iter().map(|(m, _)| *m).collect();
            if !(2..=4).contains(&new.len()) || members.len() != 1 {
                unsteady = format!(
                    "{name}: {} deliveries in 3 s by members {members:?}",
                    new.len()
                );
                break;
            }
        }
        if unsteady.is_empty() {
            return;
        }
    }
    panic!("not steady after {WINDOWS} windows of 3 s: {unsteady}");
}

/// Windows [`once_per_tick`] looks at before it calls the cluster unsteady.
const WINDOWS: usize = 4;

/// Three members in a fresh namespace of the shared etcd, settled.
async fn three_members() -> (Arc<Log>, Vec<Node>) {
    let namespace = testing::fresh_namespace();
    let log = Arc::new(Log::default());
    let mut nodes = Vec::new();
    for m in 0..3 {
        nodes.push(node(m, &namespace, &log).await);
    }
    settle(&nodes).await;
    (log, nodes)
}

/// Every member leaves, then stops firing.
async fn stop_all(nodes: Vec<Node>) {
    for mut n in nodes {
        n.cluster.take().unwrap().stop().await;
        n.engine_stop.cancel();
    }
}

/// Stores `count` `@every 1s` jobs through `engine` and waits until each fired twice.
async fn every_second(engine: &Engine, count: usize, log: &Log) -> Vec<String> {
    let names: Vec<String> = (0..count).map(|i| format!("every-{i}")).collect();
    for name in &names {
        let job = sv1::Job {
            schedule: Some("@every 1s".into()),
            ..Default::default()
        };
        engine.schedule_job(request(name, job)).await.unwrap();
    }
    wait_for("every job firing", || {
        names.iter().all(|n| log.count(n) >= 2)
    })
    .await;
    names
}

/// Every member knows all three, and all partitions are held.
async fn settle(nodes: &[Node]) {
    wait_for("all members to see each other", || {
        nodes.iter().all(|n| n.hosts.borrow().len() == nodes.len())
    })
    .await;
    // Shares settle a round or two after membership does.
    tokio::time::sleep(Duration::from_secs(1)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_one_shot_fires_once_across_members() {
    let (log, nodes) = three_members().await;
    let mut hosts = nodes[0].hosts.borrow().clone();
    hosts.sort();
    assert_eq!(
        hosts,
        ["127.0.0.1:50000", "127.0.0.1:50001", "127.0.0.1:50002"]
    );

    let reads = |nodes: &[Node]| nodes.iter().map(|n| n.store.snapshot_reads()).sum::<u64>();
    let reads_before = reads(&nodes);
    for i in 0..60 {
        // Through any member's API: the owner fires it whoever stored it.
        nodes[i % 3]
            .engine
            .schedule_job(request(
                &format!("once-{i}"),
                sv1::Job {
                    due_time: Some("1s".into()),
                    ..Default::default()
                },
            ))
            .await
            .unwrap();
    }
    wait_for("60 deliveries", || {
        (0..60).all(|i| log.count(&format!("once-{i}")) >= 1)
    })
    .await;
    let names: Vec<String> = (0..60).map(|i| format!("once-{i}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    finished(&nodes.iter().collect::<Vec<_>>(), &names).await;
    let seen = log.snapshot();
    let mut by_member = [0usize; 3];
    for i in 0..60 {
        let d = &seen[&format!("once-{i}")];
        assert_eq!(d.len(), 1, "once-{i} delivered {} times", d.len());
        by_member[d[0].0] += 1;
    }
    assert!(
        by_member.iter().filter(|c| **c > 0).count() >= 2,
        "the jobs were not shared: {by_member:?}"
    );
    // Finished one-shots are deleted from etcd.
    let left = nodes[0]
        .engine
        .list_jobs(sv1::ListJobsRequest {
            metadata: request("x", sv1::Job::default()).metadata,
        })
        .await
        .unwrap();
    assert!(left.is_empty(), "{} jobs left", left.len());
    // The owners saw each job's put in the watch: no result read before its compare-and-swap.
    assert_eq!(reads(&nodes), reads_before, "results read before their txn");
    stop_all(nodes).await;
}

/// The member each member's directory names as the owner of job `name`: the one that says
/// "me" while every other names its address; `None` while they disagree.
fn agreed_owner(dirs: &[Directory], name: &str) -> Option<usize> {
    let metadata = request(name, sv1::Job::default()).metadata.unwrap();
    let key = crate::trigger::keys::job_key(&metadata, name).unwrap();
    let owners: Vec<Owner> = dirs.iter().map(|d| d.owner_of(&key)).collect();
    let me = owners.iter().position(|o| *o == Owner::Me)?;
    let address = format!("127.0.0.1:{}", 50_000 + me);
    owners
        .iter()
        .enumerate()
        .all(|(m, o)| m == me || *o == Owner::At(address.clone()))
        .then_some(me)
}

/// Every member's directory names the same owner of each job, and that owner is the member
/// that fires it: a job paused there (as a replica's `PauseJob` does once routed to it)
/// fires on no member, while the others go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn directories_agree_on_the_owner_and_a_pause_there_holds() {
    let (log, nodes) = three_members().await;
    let names = every_second(&nodes[0].engine, 12, &log).await;
    let dirs: Vec<Directory> = nodes
        .iter()
        .map(|n| n.cluster.as_ref().unwrap().directory())
        .collect();
    wait_for("one agreed owner per job", || {
        names.iter().all(|n| agreed_owner(&dirs, n).is_some())
    })
    .await;
    let mut firing = std::collections::BTreeSet::new();
    for name in &names {
        let owner = agreed_owner(&dirs, name).unwrap();
        let seen = log.0.lock().unwrap()[name].clone();
        firing.insert(owner);
        assert_eq!(
            seen.last().map(|(m, _)| *m),
            Some(owner),
            "{name}: the directories' owner fires it"
        );
    }
    assert!(firing.len() > 1, "the jobs are spread: {firing:?}");
    let (paused, going) = names.split_at(6);
    let metadata = request("x", sv1::Job::default()).metadata.unwrap();
    for name in paused {
        let owner = agreed_owner(&dirs, name).unwrap();
        nodes[owner]
            .engine
            .pause_job(&metadata, name, "by the owner")
            .await
            .unwrap();
    }
    let before = log.snapshot();
    // The jobs going on are the clock: three ticks each, and the paused ones had theirs.
    wait_for("the jobs not paused to go on", || {
        going.iter().all(|n| log.count(n) >= before[n].len() + 3)
    })
    .await;
    let after = log.snapshot();
    for name in paused {
        assert_eq!(
            after[name].len(),
            before[name].len(),
            "{name} fired while paused"
        );
    }
    stop_all(nodes).await;
}

/// A call by hand on the owner finds the job in its trigger loop once the member brought it
/// in: one far past the horizon (kept by key and time only; without the bring-in the loop
/// does not know it) runs now, and one paused right after its create (the watch may not have
/// brought it yet) never fires.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owner_brings_a_far_or_just_created_job_in_for_a_call_by_hand() {
    let namespace = testing::fresh_namespace();
    let log = Arc::new(Log::default());
    let endpoint = testing::shared().endpoint();
    let node = node_with(endpoint, 0, &namespace, &log, Some(Duration::from_secs(60))).await;
    let dir = node.cluster.as_ref().unwrap().directory();
    let metadata = request("x", sv1::Job::default()).metadata.unwrap();
    let key = |name: &str| crate::trigger::keys::job_key(&metadata, name).unwrap();
    wait_for("the member to own every partition", || {
        dir.owner_of(&key("probe")) == Owner::Me
    })
    .await;
    let far = sv1::Job {
        schedule: Some("@every 1h".into()),
        due_time: Some("2h".into()),
        ..Default::default()
    };
    node.engine.schedule_job(request("far", far)).await.unwrap();
    // Let the watch bring it: kept far, not in the trigger loop.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let refused = node.engine.trigger_job(&metadata, "far", None).await;
    assert!(
        matches!(refused, Err(crate::engine::Error::NotFound(_))),
        "a far job is not in the loop: {refused:?}"
    );
    assert!(dir.bring_in(&key("far")).await);
    node.engine
        .trigger_job(&metadata, "far", None)
        .await
        .unwrap();
    wait_for("the far job's run now", || log.count("far") == 1).await;

    let every = sv1::Job {
        schedule: Some("@every 1s".into()),
        ..Default::default()
    };
    node.engine
        .schedule_job(request("fresh", every.clone()))
        .await
        .unwrap();
    assert!(dir.bring_in(&key("fresh")).await);
    node.engine
        .pause_job(&metadata, "fresh", "at once")
        .await
        .unwrap();
    // The same schedule, not paused, as the clock: its third tick is past the paused
    // job's third.
    node.engine
        .schedule_job(request("fresh-beside", every))
        .await
        .unwrap();
    wait_for("the job beside it to fire three times", || {
        log.count("fresh-beside") >= 3
    })
    .await;
    assert_eq!(
        log.count("fresh"),
        0,
        "a job paused right after its create fired"
    );

    // Many at once (a bulk pause): read in by batches, every one answered and then in hand.
    let names: Vec<String> = (0..300).map(|i| format!("many-{i}")).collect();
    for name in &names {
        let far = sv1::Job {
            schedule: Some("@every 1h".into()),
            due_time: Some("2h".into()),
            ..Default::default()
        };
        node.engine.schedule_job(request(name, far)).await.unwrap();
    }
    let keys: Vec<String> = names.iter().map(|n| key(n)).collect();
    let brought = futures_util::future::join_all(keys.iter().map(|k| dir.bring_in(k)));
    assert!(brought.await.into_iter().all(|b| b), "a job not brought in");
    for name in &names {
        node.engine
            .trigger_job(&metadata, name, None)
            .await
            .unwrap();
    }
    wait_for("a run now of each", || {
        names.iter().all(|n| log.count(n) == 1)
    })
    .await;
    stop_all(vec![node]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_members_share_moves_when_it_leaves_or_dies() {
    let (log, mut nodes) = three_members().await;
    let names = every_second(&nodes[0].engine, 24, &log).await;
    let owner_of_job = |name: &str| log.snapshot()[name].last().unwrap().0;
    let victims: Vec<String> = names
        .iter()
        .filter(|n| owner_of_job(n) == 2)
        .cloned()
        .collect();
    assert!(!victims.is_empty(), "member 2 owns nothing");

    // Member 2 dies: its tasks stop without a word, its lease is left to expire.
    let dead = nodes.pop().unwrap();
    dead.cluster.unwrap().task.abort();
    dead.engine_stop.cancel();
    let died = Instant::now();
    let before: HashMap<String, usize> =
        victims.iter().map(|n| (n.clone(), log.count(n))).collect();
    wait_for("the dead member's jobs to fire again", || {
        victims.iter().all(|n| log.count(n) >= before[n] + 2)
    })
    .await;
    let took = died.elapsed();
    // Bounded by the lease, not by luck: generous for a loaded machine (the e2e and the
    // benchmark measure the real figure, ≈ TTL).
    assert!(
        took <= TTL + Duration::from_secs(10),
        "takeover took {took:?}"
    );
    once_per_tick(&log, &names).await;
    wait_for("the host list to drop the dead member", || {
        nodes.iter().all(|n| n.hosts.borrow().len() == 2)
    })
    .await;

    // Member 1 leaves cleanly: its share moves at once (no lease to wait for).
    let leaving = nodes.pop().unwrap();
    let moved: Vec<String> = names
        .iter()
        .filter(|n| owner_of_job(n) == 1)
        .cloned()
        .collect();
    let left_at = Instant::now();
    leaving.cluster.unwrap().stop().await;
    leaving.engine_stop.cancel();
    let before: HashMap<String, usize> = moved.iter().map(|n| (n.clone(), log.count(n))).collect();
    wait_for("the leaver's jobs to fire again", || {
        moved.iter().all(|n| log.count(n) > before[n])
    })
    .await;
    // A clean leave does not wait for the lease to run out; what it waits for is the
    // others' watch, which takes milliseconds (generous for a loaded machine).
    assert!(
        left_at.elapsed() < TTL + Duration::from_secs(3),
        "handover took {:?}",
        left_at.elapsed()
    );
    for name in &names {
        assert_eq!(owner_of_job(name), 0, "{name} not on the last member");
    }
    stop_all(nodes).await;
}

/// A tick that keeps failing is retried by the member that takes over its partition after
/// its owner dies, as the same execution: same execution id, same nominal tick, attempts
/// counted on (an attempt the dead member had out and not written may be made again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_tick_keeps_its_execution_id_across_a_failover() {
    let (log, mut nodes) = three_members().await;
    let due = chrono::Utc::now() + chrono::TimeDelta::seconds(1);
    let job = sv1::Job {
        due_time: Some(due.to_rfc3339()),
        failure_policy: Some(crate::proto::common::JobFailurePolicy {
            policy: Some(crate::proto::common::job_failure_policy::Policy::Constant(
                crate::proto::common::JobFailurePolicyConstant {
                    interval: Some(prost_types::Duration {
                        seconds: 0,
                        nanos: 300_000_000,
                    }),
                    max_retries: None,
                },
            )),
        }),
        ..Default::default()
    };
    nodes[0]
        .engine
        .schedule_job(request("fail-over", job))
        .await
        .unwrap();
    let attempts = || log.1.lock().unwrap().clone();
    wait_for("two failed attempts", || attempts().len() >= 2).await;
    let owner = attempts()[0].0;
    let dead = nodes.remove(owner);
    dead.cluster.unwrap().task.abort();
    dead.engine_stop.cancel();
    wait_for("another member to retry the tick", || {
        attempts().iter().filter(|a| a.0 != owner).count() >= 2
    })
    .await;
    let seen = attempts();
    let (_, id, tick, _) = seen[0];
    assert!(tick.is_some(), "the trigger knows its tick");
    for (member, other_id, other_tick, _) in &seen {
        assert_eq!(
            (*other_id, *other_tick),
            (id, tick),
            "member {member}: {seen:?}"
        );
    }
    assert_eq!(
        id,
        crate::trigger::ExecutionId::for_tick("app||default||myapp||fail-over", tick.unwrap())
    );
    // Attempts 1, 2, … on the owner; the next member goes on from the last one written
    // (the one the owner had out when it died may be made again, never an earlier one).
    let on = |pick: &dyn Fn(usize) -> bool| -> Vec<u32> {
        seen.iter().filter(|a| pick(a.0)).map(|a| a.3).collect()
    };
    let before = on(&|m| m == owner);
    let after = on(&|m| m != owner);
    let consecutive = |n: &[u32]| n.windows(2).all(|w| w[1] == w[0] + 1);
    assert_eq!(before[0], 1, "{seen:?}");
    assert!(consecutive(&before) && consecutive(&after), "{seen:?}");
    assert!(after[0] >= *before.last().unwrap(), "{seen:?}");
    stop_all(nodes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_carry_on_after_etcd_restarts() {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter("jobsd=debug")
        .try_init();
    // Its own etcd: the shared one must stay up for the other tests.
    let mut etcd = tokio::task::spawn_blocking(testing::EtcdServer::start)
        .await
        .unwrap();
    let log = Arc::new(Log::default());
    let mut nodes = Vec::new();
    for m in 0..2 {
        nodes.push(node_on(etcd.endpoint(), m, "restart", &log).await);
    }
    settle(&nodes).await;
    let names = every_second(&nodes[1].engine, 8, &log).await;

    // etcd goes away for a while and comes back on the same data: the lease keep-alives and
    // the jobs watch reconnect by themselves, and every job fires again, once per tick.
    let mut etcd = tokio::task::spawn_blocking(move || {
        etcd.kill();
        std::thread::sleep(Duration::from_secs(3));
        etcd.restart();
        etcd
    })
    .await
    .unwrap();
    let back: HashMap<String, usize> = names.iter().map(|n| (n.clone(), log.count(n))).collect();
    wait_for("jobs to fire after the restart", || {
        names.iter().all(|n| log.count(n) >= back[n] + 2)
    })
    .await;
    once_per_tick(&log, &names).await;
    // A job stored after the restart is fired too.
    nodes[0]
        .engine
        .schedule_job(request(
            "after",
            sv1::Job {
                due_time: Some("0s".into()),
                ..Default::default()
            },
        ))
        .await
        .unwrap();
    wait_for("the new job", || log.count("after") >= 1).await;
    finished(&nodes.iter().collect::<Vec<_>>(), &["after"]).await;
    let after = log.snapshot().remove("after");
    assert_eq!(log.count("after"), 1, "the new job fired again: {after:?}");
    stop_all(nodes).await;
    tokio::task::spawn_blocking(move || etcd.kill())
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_without_an_index_key_as_dapr_writes_them_are_adopted() {
    let namespace = testing::fresh_namespace();
    let log = Arc::new(Log::default());
    let first = node(0, &namespace, &log).await;
    settle(std::slice::from_ref(&first)).await;
    let names = every_second(&first.engine, 12, &log).await;
    stop_all(vec![first]).await;
    // Leave go-etcd-cron's keys only, as a Dapr Scheduler writes them: no partition index.
    let raw = crate::store::etcd::client::Client::connect(&[testing::shared().endpoint()]).unwrap();
    for prefix in ["index/", "indexed/"] {
        let key = format!("{namespace}/jobsd/{prefix}");
        raw.txn(etcd::txn(
            Vec::new(),
            vec![etcd::delete_prefix(key)],
            Vec::new(),
        ))
        .await
        .unwrap();
    }
    let mut nodes = Vec::new();
    for m in 0..3 {
        nodes.push(node(m, &namespace, &log).await);
    }
    settle(&nodes).await;
    let before: HashMap<String, usize> = names.iter().map(|n| (n.clone(), log.count(n))).collect();
    wait_for("every job to fire on the new members", || {
        names.iter().all(|n| log.count(n) >= before[n] + 2)
    })
    .await;
    once_per_tick(&log, &names).await;
    stop_all(nodes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_reads_far_jobs_in_as_their_time_comes() {
    let namespace = testing::fresh_namespace();
    let log = Arc::new(Log::default());
    // Jobs stored before the member starts, as a failover finds them: one due every second,
    // four one-shots due past the member's horizon.
    let store = Arc::new(
        Etcd::connect_partitioned(
            &[testing::shared().endpoint()],
            &namespace,
            None,
            PARTITIONS,
        )
        .await
        .unwrap(),
    );
    let writer = Engine::new(store.clone(), Arc::new(SystemClock));
    let at = |d: &str| sv1::Job {
        due_time: Some(d.into()),
        ..Default::default()
    };
    writer
        .schedule_job(request(
            "near",
            sv1::Job {
                schedule: Some("@every 1s".into()),
                ..Default::default()
            },
        ))
        .await
        .unwrap();
    for name in ["far-1", "far-2", "far-deleted", "far-overwritten"] {
        writer.schedule_job(request(name, at("12s"))).await.unwrap();
    }
    let member = node_with(
        testing::shared().endpoint(),
        0,
        &namespace,
        &log,
        Some(Duration::from_secs(3)),
    )
    .await;
    settle(std::slice::from_ref(&member)).await;
    wait_for("the near job to fire", || log.count("near") >= 1).await;
    // Only the job due soon was read; the others are known by key and time.
    assert_eq!(member.engine.sync().await.unwrap().jobs, 1);
    // Changed while far: a delete never fires, an overwrite fires its new version only, and
    // a job created now, due past the horizon, stays out of memory too.
    writer
        .delete_job(sv1::DeleteJobRequest {
            name: "far-deleted".into(),
            metadata: request("far-deleted", sv1::Job::default()).metadata,
        })
        .await
        .unwrap();
    let mut overwrite = request("far-overwritten", at("14s"));
    overwrite.overwrite = true;
    writer.schedule_job(overwrite).await.unwrap();
    writer
        .schedule_job(request("far-created", at("12s")))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(member.engine.sync().await.unwrap().jobs, 1);
    let fired = ["far-1", "far-2", "far-overwritten", "far-created"];
    wait_for("the far jobs to fire", || {
        fired.iter().all(|n| log.count(n) >= 1)
    })
    .await;
    finished(&[&member], &fired).await;
    let seen = log.snapshot();
    for name in fired {
        assert_eq!(seen[name].len(), 1, "{name}: {:?}", seen[name]);
    }
    assert!(!seen.contains_key("far-deleted"), "{seen:?}");
    // Each fired at its own time: the overwrite's two seconds after the others.
    let gap = seen["far-overwritten"][0].1 - seen["far-1"][0].1;
    assert!(gap >= chrono::TimeDelta::milliseconds(1500), "{gap:?}");
    stop_all(vec![member]).await;
}

/// `dapr scheduler import` writes each job together with its counter (one txn per job, no
/// partition index key). The member that owns it sees the put through its watch and goes on
/// from the imported counter: ticks done before the export do not fire again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_imported_with_its_counter_goes_on_from_it() {
    const REPEATS: usize = 5;
    // Jobs that have fired some of their ticks, exported as the CLI reads them.
    let source = testing::fresh_namespace();
    let fired = Arc::new(Log::default());
    let exporter = node(0, &source, &fired).await;
    settle(std::slice::from_ref(&exporter)).await;
    let names: Vec<String> = (0..8).map(|i| format!("imported-{i}")).collect();
    for name in &names {
        let job = sv1::Job {
            schedule: Some("@every 1s".into()),
            repeats: Some(REPEATS as u32),
            ..Default::default()
        };
        exporter
            .engine
            .schedule_job(request(name, job))
            .await
            .unwrap();
    }
    wait_for("every job to fire once", || {
        names.iter().all(|n| fired.count(n) >= 1)
    })
    .await;
    stop_all(vec![exporter]).await;
    let raw = crate::store::etcd::client::Client::connect(&[testing::shared().endpoint()]).unwrap();
    let read_in = |namespace: &str, table: &str| {
        let prefix = format!("{namespace}/{table}/");
        let raw = raw.clone();
        async move {
            let got = raw
                .range(etcd::RangeRequest {
                    key: prefix.clone().into_bytes(),
                    range_end: etcd::prefix_end(prefix.as_bytes()),
                    ..Default::default()
                })
                .await
                .unwrap();
            got.kvs
                .into_iter()
                .map(|kv| {
                    (
                        String::from_utf8(kv.key).unwrap()[prefix.len()..].to_owned(),
                        kv.value,
                    )
                })
                .collect::<BTreeMap<String, Vec<u8>>>()
        }
    };
    let (jobs, counters) = (
        read_in(&source, "jobs").await,
        read_in(&source, "counters").await,
    );
    assert_eq!(
        jobs.len(),
        names.len(),
        "every job is left with ticks to go"
    );
    assert_eq!(counters.len(), names.len(), "every job has its counter");
    // Imported into a running member's namespace.
    let target = testing::fresh_namespace();
    let read_target = |table: &'static str| read_in(&target, table);
    let log = Arc::new(Log::default());
    let member = node(0, &target, &log).await;
    settle(std::slice::from_ref(&member)).await;
    let mut left = HashMap::new();
    for (key, value) in &jobs {
        let counter =
            <crate::store::StoredCounter as prost::Message>::decode(&counters[key][..]).unwrap();
        let name = key.rsplit("||").next().unwrap().to_owned();
        left.insert(name, REPEATS - counter.count as usize);
        raw.txn(etcd::txn(
            Vec::new(),
            vec![
                etcd::put(format!("{target}/jobs/{key}"), value.clone(), 0),
                etcd::put(format!("{target}/counters/{key}"), counters[key].clone(), 0),
            ],
            Vec::new(),
        ))
        .await
        .unwrap();
    }
    // A job is deleted once its last tick is done: every delivery of it came before.
    let deadline = Instant::now() + PATIENCE;
    while !read_target("jobs").await.is_empty() {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for the imported jobs to finish"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for name in &names {
        assert_eq!(
            log.count(name),
            left[name],
            "{name}: ticks after the import"
        );
    }
    assert!(
        member.store.counter_reads() >= names.len() as u64,
        "a put written by someone else has its counter read"
    );
    stop_all(vec![member]).await;
}

/// A burst of one-shots through one member, all due at once, all fire: the watch brings far
/// more puts than the member takes at a time while it reads their counters, and that read
/// must not wait behind the watch's unread data (it did while both shared one connection).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_creates_all_fire_while_the_member_reads_their_counters() {
    const BURST: usize = 20_000;
    let namespace = testing::fresh_namespace();
    let log = Arc::new(Log::default());
    let member = node(0, &namespace, &log).await;
    settle(std::slice::from_ref(&member)).await;
    let data = prost_types::Any {
        type_url: "type.googleapis.com/google.protobuf.StringValue".into(),
        value: vec![b'x'; 400],
    };
    let names: Vec<String> = (0..BURST).map(|i| format!("burst-{i}")).collect();
    for chunk in names.chunks(1_000) {
        let jobs = chunk
            .iter()
            .map(|name| {
                let job = sv1::Job {
                    due_time: Some("3s".into()),
                    data: Some(data.clone()),
                    ..Default::default()
                };
                (request(name, job), crate::engine::JobExtras::default())
            })
            .collect();
        for created in member.engine.schedule_jobs(jobs).await.unwrap() {
            created.unwrap();
        }
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    while names.iter().any(|n| log.count(n) == 0) {
        let fired = names.iter().filter(|n| log.count(n) > 0).count();
        assert!(Instant::now() < deadline, "only {fired} of {BURST} fired");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Each put was this member's own create, which leaves no counter: none was read.
    assert_eq!(
        member.store.counter_reads(),
        0,
        "counters read for own creates"
    );
    stop_all(vec![member]).await;
}
