//! The run history and finished jobs, run against every backend like the rest of the suite:
//! `RecordResult`, its pruning and finishing, the history reads (`list_runs`, `get_finished`,
//! `page`), what forgets history (`PutJob`, `DeleteJob`, `DeletePrefix`, `DeleteFinished`),
//! and model checks that the backends agree with history in play.

use super::*;

/// A run, told apart by `n` (its attempt, nominal time and error text).
fn run(n: u32, outcome: RunOutcome) -> StoredRun {
    StoredRun {
        nominal: Some(at(i64::from(n))),
        attempt: n,
        outcome: outcome.into(),
        error: format!("run {n}"),
        ..StoredRun::default()
    }
}

fn at(seconds: i64) -> Timestamp {
    Timestamp {
        seconds: 1_700_000_000 + seconds,
        nanos: 0,
    }
}

/// Result `n` of job `key` (version `generation`), keeping `limit` runs; not finishing.
pub(super) fn record(key: &str, generation: u64, n: u32, limit: u32) -> ResultRecord {
    ResultRecord {
        key: key.into(),
        generation,
        progress: Some(counter(generation, n)),
        finish: false,
        dropped: false,
        run: Some(run(n, RunOutcome::Success)),
        history_limit: limit,
        finished_at: None,
        skipped_ticks: 0,
        pause: None,
        dead_letter: None,
        hold: None,
        release: Vec::new(),
        resume: false,
    }
}

/// `r`, finishing the job; kept as finished (stamped `finished_at`) when given.
fn finishing(r: ResultRecord, finished_at: Option<Timestamp>) -> ResultRecord {
    ResultRecord {
        finish: true,
        finished_at,
        ..r
    }
}

pub(super) fn result(r: ResultRecord) -> Op {
    Op::RecordResult(Box::new(r))
}

/// The sequence numbers `list_runs` gives, with their runs' attempts (`n`).
async fn runs(s: &dyn Store, key: &str, before: Option<u64>, limit: usize) -> Vec<(u64, u32)> {
    let listed = s.list_runs(key, before, limit).await.expect("list_runs");
    listed
        .into_iter()
        .map(|(seq, r)| (seq, r.attempt))
        .collect()
}

/// Job `key` (version `generation`) with results `0..n`, keeping `limit` runs.
async fn job_with_runs(s: &dyn Store, key: &str, generation: u64, n: u32, limit: u32) {
    write1(s, put(key, job(generation, key), false)).await;
    for i in 0..n {
        assert_eq!(
            write1(s, result(record(key, generation, i, limit))).await,
            OpResult::Done
        );
    }
}

async fn a_result_writes_a_run_and_the_status(make: Make) {
    let f = make(&[]);
    let s = &*f.store;
    write1(s, put("k", job(1, "a"), true)).await;
    let mut r = record("k", 1, 0, 10);
    r.run = Some(run(0, RunOutcome::Failed));
    assert_eq!(write1(s, result(r)).await, OpResult::Done);
    let c = s.get_counter("k").await.unwrap().expect("status");
    assert_eq!((c.generation, c.count, c.runs), (1, 0, 1));
    assert_eq!((c.delivered, c.failed_attempts, c.succeeded), (1, 1, 0));
    assert_eq!(c.last_outcome(), RunOutcome::Failed);
    assert_eq!(c.last_error, "run 0");
    let listed = s.list_runs("k", None, 10).await.unwrap();
    assert_eq!(listed, vec![(0, run(0, RunOutcome::Failed))]);
    // A result of another version records nothing.
    assert_eq!(
        write1(s, result(record("k", 2, 1, 10))).await,
        OpResult::Skipped
    );
    assert_eq!(s.get_counter("k").await.unwrap(), Some(c));
    assert_eq!(runs(s, "k", None, 10).await, [(0, 0)]);
    // History off: the status still counts, no run is kept.
    write1(s, put("off", job(1, "a"), true)).await;
    write1(s, result(record("off", 1, 0, 0))).await;
    assert_eq!(s.get_counter("off").await.unwrap().unwrap().runs, 1);
    assert!(runs(s, "off", None, 10).await.is_empty());
}

async fn history_is_pruned_at_its_limit(make: Make) {
    let f = make(&[]);
    let s = &*f.store;
    job_with_runs(s, "k", 1, 7, 3).await;
    assert_eq!(runs(s, "k", None, 100).await, [(6, 6), (5, 5), (4, 4)]);
    let c = s.get_counter("k").await.unwrap().unwrap();
    assert_eq!((c.runs, c.succeeded, c.count), (7, 7, 6));
}

async fn list_runs_is_newest_first_within_limit_and_before(make: Make) {
    let f = make(&[]);
    let s = &*f.store;
    job_with_runs(s, "a", 1, 6, 100).await;
    // Keys that extend "a" keep their own runs.
    job_with_runs(s, "a|", 1, 2, 100).await;
    job_with_runs(s, "ab", 1, 1, 100).await;
    let all: Vec<(u64, u32)> = (0..6u32).rev().map(|i| (u64::from(i), i)).collect();
    assert_eq!(runs(s, "a", None, 100).await, all);
    assert_eq!(runs(s, "a", None, 2).await, [(5, 5), (4, 4)]);
    assert_eq!(runs(s, "a", Some(4), 2).await, [(3, 3), (2, 2)]);
    assert_eq!(runs(s, "a", Some(1), 100).await, [(0, 0)]);
    assert!(runs(s, "a", Some(0), 100).await.is_empty());
    assert_eq!(runs(s, "a", Some(99), 1).await, [(5, 5)]);
    assert!(runs(s, "a", None, 0).await.is_empty());
    assert_eq!(runs(s, "a|", None, 100).await, [(1, 1), (0, 0)]);
    assert!(runs(s, "missing", None, 100).await.is_empty());
}

async fn a_finishing_job_moves_to_finished_with_its_runs(make: Make) {
    let f = make(&[]);
    let s = &*f.store;
    job_with_runs(s, "kept", 1, 2, 10).await;
    let last = finishing(record("kept", 1, 2, 10), Some(at(100)));
    assert_eq!(write1(s, result(last)).await, OpResult::Done);
    assert_eq!(s.get_job("kept").await.unwrap(), None);
    assert_eq!(s.get_counter("kept").await.unwrap(), None);
    let done = s
        .get_finished("kept")
        .await
        .unwrap()
        .expect("finished record");
    assert_eq!(done.job, Some(job(1, "kept")));
    assert_eq!(done.finished_at, Some(at(100)));
    let c = done.counter.expect("status as it finished");
    assert_eq!((c.runs, c.succeeded, c.count), (3, 3, 2));
    assert_eq!(runs(s, "kept", None, 10).await, [(2, 2), (1, 1), (0, 0)]);
    // Without a finished stamp (retention off) the job goes with its history, as in Dapr.
    job_with_runs(s, "gone", 1, 2, 10).await;
    let last = finishing(record("gone", 1, 2, 10), None);
    assert_eq!(write1(s, result(last)).await, OpResult::Done);
    assert_eq!(s.get_job("gone").await.unwrap(), None);
    assert_eq!(s.get_finished("gone").await.unwrap(), None);
    assert!(runs(s, "gone", None, 10).await.is_empty());
    // A finishing result of an overwritten version leaves the new one alone.
    job_with_runs(s, "over", 1, 1, 10).await;
    write1(s, put("over", job(2, "new"), false)).await;
    let stale = finishing(record("over", 1, 1, 10), Some(at(100)));
    assert_eq!(write1(s, result(stale)).await, OpResult::Skipped);
    assert_eq!(s.get_job("over").await.unwrap(), Some(job(2, "new")));
    assert_eq!(s.get_finished("over").await.unwrap(), None);
}

async fn put_delete_and_prefix_delete_forget_history(make: Make) {
    let f = make(&[]);
    let s = &*f.store;
    let finish = |key: &str| result(finishing(record(key, 1, 1, 10), Some(at(5))));
    // A new version starts a new history and drops the finished record.
    job_with_runs(s, "p", 1, 2, 10).await;
    write1(s, put("p", job(2, "v2"), false)).await;
    assert!(runs(s, "p", None, 10).await.is_empty());
    write1(s, result(record("p", 2, 0, 10))).await;
    assert_eq!(runs(s, "p", None, 10).await, [(0, 0)]);
    job_with_runs(s, "f", 1, 1, 10).await;
    write1(s, finish("f")).await;
    assert_eq!(
        write1(s, put("f", job(3, "again"), true)).await,
        OpResult::Done
    );
    assert_eq!(s.get_finished("f").await.unwrap(), None);
    assert!(runs(s, "f", None, 10).await.is_empty());
    // Delete: the job, its history and its finished record.
    job_with_runs(s, "d", 1, 2, 10).await;
    assert_eq!(
        write1(s, Op::DeleteJob { key: "d".into() }).await,
        OpResult::Deleted(1)
    );
    assert!(runs(s, "d", None, 10).await.is_empty());
    job_with_runs(s, "df", 1, 1, 10).await;
    write1(s, finish("df")).await;
    assert_eq!(
        write1(s, Op::DeleteJob { key: "df".into() }).await,
        OpResult::Deleted(0)
    );
    assert_eq!(s.get_finished("df").await.unwrap(), None);
    assert!(runs(s, "df", None, 10).await.is_empty());
    // A prefix: everything under it, nothing past it.
    for key in ["x||a", "x||b", "x|", "y"] {
        job_with_runs(s, key, 1, 2, 10).await;
    }
    write1(s, finish("x||b")).await;
    write1(s, finish("y")).await;
    assert_eq!(
        write1(
            s,
            Op::DeletePrefix {
                prefix: "x||".into()
            }
        )
        .await,
        OpResult::Deleted(1)
    );
    for gone in ["x||a", "x||b"] {
        assert!(runs(s, gone, None, 10).await.is_empty(), "{gone}");
        assert_eq!(s.get_finished(gone).await.unwrap(), None, "{gone}");
    }
    assert_eq!(runs(s, "x|", None, 10).await.len(), 2);
    assert_eq!(runs(s, "y", None, 10).await.len(), 3);
    assert!(s.get_finished("y").await.unwrap().is_some());
    // And mixed with other ops in one request.
    let results = s
        .write(vec![
            Op::DeletePrefix { prefix: "y".into() },
            put("x|", job(2, "x"), false),
        ])
        .await
        .unwrap();
    assert_eq!(results, [OpResult::Deleted(0), OpResult::Done]);
    assert!(runs(s, "y", None, 10).await.is_empty());
    assert_eq!(s.get_finished("y").await.unwrap(), None);
    assert!(runs(s, "x|", None, 10).await.is_empty());
}

async fn delete_finished_honours_before(make: Make) {
    let f = make(&[]);
    let s = &*f.store;
    job_with_runs(s, "k", 1, 2, 10).await;
    write1(s, result(finishing(record("k", 1, 2, 10), Some(at(100))))).await;
    let sweep = |seconds| Op::DeleteFinished {
        key: "k".into(),
        before: at(seconds),
    };
    assert_eq!(write1(s, sweep(99)).await, OpResult::Deleted(0));
    assert!(s.get_finished("k").await.unwrap().is_some());
    assert_eq!(runs(s, "k", None, 10).await.len(), 3);
    assert_eq!(write1(s, sweep(100)).await, OpResult::Deleted(1));
    assert_eq!(s.get_finished("k").await.unwrap(), None);
    assert!(runs(s, "k", None, 10).await.is_empty());
    assert_eq!(write1(s, sweep(200)).await, OpResult::Deleted(0));
    // An active job is not a finished one.
    job_with_runs(s, "live", 1, 1, 10).await;
    let op = Op::DeleteFinished {
        key: "live".into(),
        before: at(1000),
    };
    assert_eq!(write1(s, op).await, OpResult::Deleted(0));
    assert_eq!(runs(s, "live", None, 10).await.len(), 1);
}

/// A page item as `(key, runs in its status, finished_at)`.
type Seen = (String, Option<u64>, Option<Timestamp>);

fn seen(key: &str, runs: Option<u64>, finished_at: Option<Timestamp>) -> Seen {
    (key.to_owned(), runs, finished_at)
}

async fn pages_of_active_and_finished_jobs_start_after_after(make: Make) {
    // A job whose counter is of another version (the ops never leave one; a page must not
    // show it as the job's).
    let f = make(&[
        (Table::Jobs, "o||e", job(1, "o||e").encode_to_vec()),
        (Table::Counters, "o||e", counter(2, 3).encode_to_vec()),
    ]);
    let s = &*f.store;
    for (i, key) in ["o||a", "o||b", "o||c", "o||d", "o|", "p"]
        .iter()
        .enumerate()
    {
        job_with_runs(s, key, i as u64, 1, 10).await;
    }
    // A new version has no status yet.
    write1(s, put("o||b", job(9, "o||b"), false)).await;
    for (key, generation) in [("o||c", 2), ("p", 5)] {
        let r = finishing(record(key, generation, 1, 10), Some(at(7)));
        assert_eq!(write1(s, result(r)).await, OpResult::Done);
    }
    let page = |of, after: Option<&'static str>, limit| async move {
        let items = s.page(of, "o||", after, limit).await.expect("page");
        items
            .into_iter()
            .map(|i| (i.key, i.counter.map(|c| c.runs), i.finished_at))
            .collect::<Vec<Seen>>()
    };
    assert_eq!(
        page(PageOf::Active, None, 2).await,
        [seen("o||a", Some(1), None), seen("o||b", None, None)]
    );
    assert_eq!(
        page(PageOf::Active, Some("o||b"), 2).await,
        [seen("o||d", Some(1), None), seen("o||e", None, None)]
    );
    assert!(page(PageOf::Active, Some("o||e"), 2).await.is_empty());
    // `after` before the prefix starts at it; past it, nothing.
    assert_eq!(
        page(PageOf::Active, Some("a"), 1).await,
        [seen("o||a", Some(1), None)]
    );
    assert!(page(PageOf::Active, Some("z"), 10).await.is_empty());
    assert!(page(PageOf::Active, None, 0).await.is_empty());
    assert_eq!(
        page(PageOf::Finished, None, 10).await,
        [seen("o||c", Some(2), Some(at(7)))]
    );
    assert!(page(PageOf::Finished, Some("o||c"), 10).await.is_empty());
    // Items carry the job, and the status as it finished.
    let all = s.page(PageOf::Finished, "", None, 10).await.unwrap();
    let keys: Vec<&str> = all.iter().map(|i| i.key.as_str()).collect();
    assert_eq!(keys, ["o||c", "p"]);
    assert_eq!(all[1].job, job(5, "p"));
    assert_eq!(all[1].counter.as_ref().map(|c| c.generation), Some(5));
    let active = s.page(PageOf::Active, "", None, 2).await.unwrap();
    let keys: Vec<&str> = active.iter().map(|i| i.key.as_str()).collect();
    assert_eq!(keys, ["o|", "o||a"]);
    assert_eq!(active[0].job, job(4, "o|"));
    assert_eq!(active[0].finished_at, None);
}

async fn a_job_put_and_its_results_in_one_write(make: Make) {
    let f = make(&[]);
    let s = &*f.store;
    job_with_runs(s, "k", 1, 3, 10).await;
    // A new version and its first results in one request: the old runs go, the new stay.
    let results = s
        .write(vec![
            put("k", job(2, "v2"), false),
            result(record("k", 2, 10, 10)),
            result(record("k", 2, 11, 10)),
            put("other", job(1, "o"), true),
            result(record("other", 1, 0, 1)),
            result(record("other", 1, 1, 1)),
        ])
        .await
        .unwrap();
    assert_eq!(results, [OpResult::Done; 6]);
    assert_eq!(runs(s, "k", None, 10).await, [(1, 11), (0, 10)]);
    assert_eq!(runs(s, "other", None, 10).await, [(1, 1)]);
    // Requests queued together share a commit and still apply in order.
    let (a, b, c) = tokio::join!(
        s.write(vec![Op::DeleteJob { key: "k".into() }]),
        s.write(vec![put("k", job(3, "v3"), true)]),
        s.write(vec![result(record("k", 3, 20, 10))]),
    );
    assert_eq!(a.unwrap(), [OpResult::Deleted(1)]);
    assert_eq!(b.unwrap(), [OpResult::Done]);
    assert_eq!(c.unwrap(), [OpResult::Done]);
    assert_eq!(runs(s, "k", None, 10).await, [(0, 20)]);
}

async fn corrupt_history_records_name_their_table(make: Make) {
    let f = make(&[
        (Table::Finished, "bad", garbage()),
        (Table::Runs, &run_key("badrun", 0), garbage()),
    ]);
    let s = &*f.store;
    match s.get_finished("bad").await {
        Err(Error::Corrupt { table, key, .. }) => {
            assert_eq!((table, key.as_str()), ("finished", "bad"))
        }
        other => panic!("{other:?}"),
    }
    match s.list_runs("badrun", None, 10).await {
        Err(Error::Corrupt { table, .. }) => assert_eq!(table, "runs"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        s.page(PageOf::Finished, "", None, 10).await,
        Err(Error::Corrupt {
            table: "finished",
            ..
        })
    ));
    // A request that reads the corrupt record fails whole: its result before it is undone.
    write1(s, put("k", job(1, "a"), true)).await;
    let err = s
        .write(vec![
            result(record("k", 1, 0, 10)),
            Op::DeleteFinished {
                key: "bad".into(),
                before: at(0),
            },
        ])
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Corrupt {
                table: "finished",
                ..
            }
        ),
        "{err}"
    );
    assert!(runs(s, "k", None, 10).await.is_empty());
    assert_eq!(s.get_counter("k").await.unwrap(), None);
    // Other records are fine, and a new version replaces the corrupt one.
    write1(s, result(record("k", 1, 0, 10))).await;
    assert_eq!(runs(s, "k", None, 10).await, [(0, 0)]);
    write1(s, put("bad", job(1, "b"), true)).await;
    assert_eq!(s.get_finished("bad").await.unwrap(), None);
}

async fn closed_store_refuses_history_reads(make: Make) {
    let f = make(&[]);
    let s = &*f.store;
    s.close().await.unwrap();
    assert!(matches!(s.get_finished("k").await, Err(Error::Closed)));
    assert!(matches!(
        s.list_runs("k", None, 1).await,
        Err(Error::Closed)
    ));
    assert!(matches!(
        s.page(PageOf::Active, "", None, 1).await,
        Err(Error::Closed)
    ));
}

/// A replica that lost a job keeps retrying its last result across an etcd outage; by the
/// time it lands, the new owner has fired more ticks. Written, it would move the counter back
/// and the owner after that would fire those ticks again.
async fn progress_behind_the_stored_counter_is_skipped(make: Make) {
    let f = make(&[]);
    let s = &*f.store;
    job_with_runs(s, "k", 1, 4, 10).await;
    let before = s.get_counter("k").await.unwrap().unwrap();
    assert_eq!(before.count, 3);
    assert_eq!(
        write1(s, result(record("k", 1, 1, 10))).await,
        OpResult::Skipped
    );
    let stale = Op::PutCounter {
        key: "k".into(),
        counter: counter(1, 2),
    };
    assert_eq!(write1(s, stale).await, OpResult::Skipped);
    assert_eq!(s.get_counter("k").await.unwrap(), Some(before));
    assert_eq!(runs(s, "k", None, 1).await, [(3, 3)]);
    // The same progress again (a retry's attempt) and later progress are written.
    assert_eq!(
        write1(s, result(record("k", 1, 3, 10))).await,
        OpResult::Done
    );
    let on = Op::PutCounter {
        key: "k".into(),
        counter: counter(1, 5),
    };
    assert_eq!(write1(s, on).await, OpResult::Done);
    assert_eq!(s.get_counter("k").await.unwrap().unwrap().count, 5);
    // A new version starts from nothing.
    write1(s, put("k", job(2, "b"), false)).await;
    assert_eq!(
        write1(s, result(record("k", 2, 0, 10))).await,
        OpResult::Done
    );
}

suite!(
    progress_behind_the_stored_counter_is_skipped,
    a_result_writes_a_run_and_the_status,
    history_is_pruned_at_its_limit,
    list_runs_is_newest_first_within_limit_and_before,
    a_finishing_job_moves_to_finished_with_its_runs,
    put_delete_and_prefix_delete_forget_history,
    delete_finished_honours_before,
    pages_of_active_and_finished_jobs_start_after_after,
    a_job_put_and_its_results_in_one_write,
    corrupt_history_records_name_their_table,
    closed_store_refuses_history_reads,
);

// ---- the backends agree on random op sequences, history included ----

mod model {
    use proptest::prelude::*;

    use super::*;

    const KEYS: [&str; 6] = ["a", "a|", "a||b", "ab", "b", "\u{10FFFF}"];

    /// Every op, history ops included (results of versions 0..3, finishing or not).
    fn op() -> impl Strategy<Value = Op> {
        let key = proptest::sample::select(KEYS.to_vec()).prop_map(String::from);
        prop_oneof![
            3 => super::super::model::op(),
            3 => (key.clone(), 0..3u64, 0..4u32, 0..3u32, 0..4u8).prop_map(
                |(k, g, n, limit, how)| {
                    let r = record(&k, g, n, limit);
                    result(match how {
                        0 => finishing(r, None),
                        1 => finishing(r, Some(at(i64::from(n)))),
                        _ => r,
                    })
                }
            ),
            1 => (key.clone(), 0..4i64).prop_map(|(key, seconds)| Op::DeleteFinished {
                key,
                before: at(seconds),
            }),
            1 => (key.clone(), 0..3u64, any::<bool>()).prop_map(|(key, generation, pause)| {
                Op::SetPaused {
                    key,
                    generation,
                    paused: pause.then(|| paused("p")),
                }
            }),
            // Given-up ticks that pause their job or dead-letter it into one of the keys.
            1 => (key.clone(), 0..3u64, 0..4u32, key.clone(), key, any::<bool>()).prop_map(
                |(k, g, n, to, fallback, pause)| {
                    let mut r = record(&k, g, n, 3);
                    r.dropped = true;
                    if pause {
                        r.pause = Some(paused("exhausted"));
                    } else {
                        r.dead_letter = Some(dead_letter(&to, &fallback));
                    }
                    result(r)
                }
            ),
        ]
    }

    /// Everything a store holds for `KEYS`: jobs with counters, finished records, runs.
    /// Compared as values, not as their `Debug` text: a counter's maps (`on_exhausted`,
    /// `skipped`) print in no fixed order.
    type State = (
        Vec<(PageOf, PageItem)>,
        Vec<(&'static str, Vec<(u64, u32)>)>,
    );

    async fn state(s: &dyn Store) -> State {
        let mut items = Vec::new();
        for of in [PageOf::Active, PageOf::Finished] {
            for item in s.page(of, "", None, 100).await.unwrap() {
                items.push((of, item));
            }
        }
        let mut all_runs = Vec::new();
        for key in KEYS {
            all_runs.push((key, runs(s, key, None, 100).await));
        }
        (items, all_runs)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
        /// Memory applies requests one by one; redb and etcd get them submitted together
        /// (one task polls them in order, so they queue in order and share commits).
        #[test]
        fn memory_redb_and_etcd_agree(requests in proptest::collection::vec(
            proptest::collection::vec(op(), 0..6), 1..10)) {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let m = memory(&[]);
                let mut expected = Vec::new();
                for ops in &requests {
                    expected.push(m.store.write(ops.clone()).await.unwrap());
                }
                let want = state(&*m.store).await;
                for other in [redb(&[]), etcd(&[])] {
                    let got = futures_util::future::join_all(
                        requests.iter().map(|ops| other.store.write(ops.clone())),
                    )
                    .await;
                    let got: Vec<Vec<OpResult>> = got.into_iter().map(Result::unwrap).collect();
                    assert_eq!(got, expected);
                    assert_eq!(state(&*other.store).await, want);
                }
            });
        }
    }
}
