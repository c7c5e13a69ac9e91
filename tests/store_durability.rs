//! What the redb store promises a caller: an acknowledged write survives `kill -9`, and
//! concurrent writers share fsyncs.
//!
//! The crash test re-executes this test binary with `JOBSD_STORE_CRASH_WRITER` set, which
//! turns `crash_writer_role` into a writer that prints `ack <key>` after each durable write.
//! With `JOBSD_STORE_CRASH_NO_CHECKPOINT` set the writer never checkpoints its write-ahead log,
//! so everything it acknowledged must come back from the log.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use jobsd::proto::dapr_scheduler as sv1;
use jobsd::proto::jobsd_store::stored_job::Begin;
use jobsd::store::{Op, OpResult, Redb, RedbOptions, Store, StoredJob};
use prost_types::{Any, Timestamp};

/// Data dir of the writer role; its presence selects the role.
const ROLE_ENV: &str = "JOBSD_STORE_CRASH_WRITER";
/// Round number, so every round writes new keys.
const ROUND_ENV: &str = "JOBSD_STORE_CRASH_ROUND";
/// Set: the writer role never checkpoints (an hour's interval, no size bound).
const NO_CHECKPOINT_ENV: &str = "JOBSD_STORE_CRASH_NO_CHECKPOINT";
/// Acknowledgements the parent waits for before it kills the writer.
const ACKS_BEFORE_KILL: usize = 600;
/// Concurrent writer tasks in the child.
const WRITERS: usize = 8;
/// Jobs per write in the child.
const BATCH: usize = 10;

fn job(generation: u64, name: &str) -> StoredJob {
    StoredJob {
        job: Some(sv1::Job {
            schedule: Some("@every 10s".into()),
            repeats: None,
            due_time: Some("5s".into()),
            ttl: None,
            data: Some(Any {
                type_url: "type.googleapis.com/google.protobuf.StringValue".into(),
                value: format!("payload of {name}").into_bytes(),
            }),
            failure_policy: None,
        }),
        metadata: Some(sv1::JobMetadata {
            app_id: "crash-app".into(),
            namespace: "default".into(),
            target: Some(sv1::JobTargetMetadata {
                r#type: Some(sv1::job_target_metadata::Type::Job(sv1::TargetJob {})),
            }),
            concurrency_key: None,
        }),
        generation,
        begin: Some(Begin::DueTime(Timestamp {
            seconds: 1_800_000_000,
            nanos: 0,
        })),
        expiration: None,
        ..Default::default()
    }
}

fn key(round: &str, writer: usize, seq: usize) -> String {
    format!("app||default||crash-app||r{round}-w{writer}-{seq:08}")
}

/// The child: writes batches forever, acknowledging each key on stdout once durable.
#[test]
fn crash_writer_role() {
    let Ok(dir) = std::env::var(ROLE_ENV) else {
        return;
    };
    let round = std::env::var(ROUND_ENV).expect("round");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let mut options = RedbOptions::default();
        if std::env::var_os(NO_CHECKPOINT_ENV).is_some() {
            options.checkpoint_interval = Duration::from_secs(3600);
            options.checkpoint_bytes = u64::MAX;
            options.checkpoint_work = Duration::MAX;
        }
        let store = Arc::new(Redb::open_with(&dir, options).expect("open"));
        let tasks: Vec<_> = (0..WRITERS)
            .map(|writer| {
                let store = Arc::clone(&store);
                let round = round.clone();
                tokio::spawn(async move {
                    for seq in (0..).step_by(BATCH) {
                        let keys: Vec<String> =
                            (seq..seq + BATCH).map(|s| key(&round, writer, s)).collect();
                        let ops = keys
                            .iter()
                            .map(|k| Op::PutJob {
                                key: k.clone(),
                                job: job(seq as u64, k),
                                create_only: true,
                                due: None,
                            })
                            .collect();
                        let results = store.write(ops).await.expect("write");
                        assert!(results.iter().all(|r| *r == OpResult::Done));
                        let mut out = std::io::stdout().lock();
                        for k in &keys {
                            writeln!(out, "ack {k}").expect("stdout");
                        }
                        out.flush().expect("stdout");
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.expect("writer");
        }
    });
}

/// Jobs in the redb file alone (its last durable commit), without replaying the log.
fn jobs_in_redb_file(dir: &std::path::Path) -> u64 {
    use redb::{ReadableDatabase, ReadableTableMetadata};
    let db = redb::Database::create(dir.join("jobsd.redb")).unwrap();
    let txn = db.begin_read().unwrap();
    let def: redb::TableDefinition<&str, &[u8]> = redb::TableDefinition::new("jobs");
    txn.open_table(def).unwrap().len().unwrap()
}

#[test]
fn kill_9_loses_no_acknowledged_write() {
    kill_9_rounds(false);
}

#[test]
fn kill_9_between_checkpoints_loses_no_acknowledged_write() {
    kill_9_rounds(true);
}

/// The key of `ack <key>` on a complete line (one that ends in a newline: a line cut short by
/// the kill was never fully printed, so it acknowledges nothing); `None` at the end of the pipe.
fn next_ack(out: &mut impl BufRead) -> Option<Option<String>> {
    let mut line = String::new();
    if out.read_line(&mut line).unwrap() == 0 {
        return None;
    }
    let key = line
        .strip_suffix('\n')
        .and_then(|l| l.strip_prefix("ack "))
        .map(str::to_owned);
    Some(key)
}

/// What one writer task of one round acknowledged: the highest sequence number, if any.
type LastAcked = std::collections::HashMap<(usize, usize), usize>;

/// The round, writer and sequence number a key of `key()` names.
fn parse_key(key: &str) -> (usize, usize, usize) {
    let tail = key.rsplit("||").next().unwrap();
    let parts: Vec<&str> = tail.splitn(3, '-').collect();
    let number = |s: &str, prefix: &str| s.strip_prefix(prefix).unwrap().parse().unwrap();
    (
        number(parts[0], "r"),
        number(parts[1], "w"),
        number(parts[2], ""),
    )
}

/// Every key a writer task may have written: each task writes its batches one after the other
/// and prints a batch's acks before it starts the next, so at the kill it had written exactly
/// the batches up to the one of its last ack, plus the next one if that ack ended its batch.
fn attempted(rounds: usize, last_acked: &LastAcked) -> std::collections::HashSet<String> {
    let mut keys = std::collections::HashSet::new();
    for round in 0..rounds {
        for writer in 0..WRITERS {
            let end = match last_acked.get(&(round, writer)) {
                None => BATCH,
                Some(&last) if last % BATCH == BATCH - 1 => last + 1 + BATCH,
                Some(&last) => (last / BATCH + 1) * BATCH,
            };
            keys.extend((0..end).map(|seq| key(&round.to_string(), writer, seq)));
        }
    }
    keys
}

/// Three rounds of: a writer child acknowledges writes, gets `kill -9`, and the reopened store
/// must hold every key the child acknowledged before it died, and nothing it did not attempt.
fn kill_9_rounds(no_checkpoint: bool) {
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    // Without checkpoints, let many batches pile up in the log only.
    let acks_before_kill = if no_checkpoint {
        10 * ACKS_BEFORE_KILL
    } else {
        ACKS_BEFORE_KILL
    };
    let mut acked: Vec<String> = Vec::new();
    let mut last_acked = LastAcked::new();
    // Jobs the store held after the previous round's reopen.
    let mut stored_before = 0;
    for round in 0..3 {
        let mut command = Command::new(&exe);
        command
            .args([
                "crash_writer_role",
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(ROLE_ENV, dir.path())
            .env(ROUND_ENV, round.to_string());
        if no_checkpoint {
            command.env(NO_CHECKPOINT_ENV, "1");
        }
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut record = |key: String| {
            let (r, writer, seq) = parse_key(&key);
            assert_eq!(r, round, "{key}");
            let last = last_acked.entry((round, writer)).or_insert(seq);
            *last = (*last).max(seq);
            acked.push(key);
        };
        let mut this_round = 0;
        while this_round < acks_before_kill {
            let Some(line) = next_ack(&mut stdout) else {
                break;
            };
            if let Some(key) = line {
                record(key);
                this_round += 1;
            }
        }
        assert!(
            this_round >= acks_before_kill,
            "round {round}: the writer stopped after {this_round} acks"
        );
        // SIGKILL while the writer is still going: no chance to flush or close.
        child.kill().unwrap();
        child.wait().unwrap();
        // The writer went on acknowledging until the kill: every ack it printed counts.
        while let Some(line) = next_ack(&mut stdout) {
            if let Some(key) = line {
                record(key);
                this_round += 1;
            }
        }

        let in_redb_file = jobs_in_redb_file(dir.path());
        if no_checkpoint {
            // Only the earlier rounds (checkpointed by the reopens below) are in redb itself:
            // this round's acknowledged writes exist only in the log.
            assert!(
                in_redb_file <= stored_before as u64,
                "round {round}: {in_redb_file} jobs in redb, the log was checkpointed"
            );
        }
        let started = Instant::now();
        let store = Redb::open(dir.path()).unwrap();
        let reopened = started.elapsed();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let stored = rt.block_on(store.list_jobs("")).unwrap();
        let stored: std::collections::HashSet<&str> =
            stored.iter().map(|(k, _)| k.as_str()).collect();
        for key in &acked {
            assert!(stored.contains(key.as_str()), "round {round}: lost {key}");
        }
        // Besides the acknowledged ones, only the writes in flight at each kill (at most one
        // batch per writer task) may have made it.
        let attempted = attempted(round + 1, &last_acked);
        for key in &stored {
            assert!(
                attempted.contains(*key),
                "round {round}: {key} stored but never written"
            );
        }
        eprintln!(
            "round {round}: {} acked so far ({this_round} this round), {} stored of {} \
             attempted ({in_redb_file} in redb before replay, {} batches replayed), reopen \
             after kill took {reopened:?}",
            acked.len(),
            stored.len(),
            attempted.len(),
            store.stats().replayed
        );
        stored_before = stored.len();
        drop(store);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_share_commits() {
    const TASKS: usize = 64;
    const OPS_PER_TASK: usize = 200;
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Redb::open(dir.path()).unwrap());
    let before = store.stats();
    let tasks: Vec<_> = (0..TASKS)
        .map(|t| {
            let store = Arc::clone(&store);
            tokio::spawn(async move {
                for i in 0..OPS_PER_TASK {
                    let key = format!("app||default||gc||t{t:02}-{i:04}");
                    let results = store
                        .write(vec![Op::PutJob {
                            job: job(i as u64, &key),
                            key,
                            create_only: true,
                            due: None,
                        }])
                        .await
                        .unwrap();
                    assert_eq!(results, [OpResult::Done]);
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let after = store.stats();
    let ops = after.ops - before.ops;
    let commits = after.commits - before.commits;
    assert_eq!(ops, (TASKS * OPS_PER_TASK) as u64);
    assert_eq!(after.requests - before.requests, ops);
    assert!(
        commits < ops / 4,
        "{commits} commits for {ops} ops: writes are not grouped"
    );
    eprintln!(
        "{ops} ops in {commits} commits ({:.1} per commit)",
        ops as f64 / commits as f64
    );
    assert_eq!(
        store.list_jobs("app||default||gc||").await.unwrap().len(),
        TASKS * OPS_PER_TASK
    );
}
