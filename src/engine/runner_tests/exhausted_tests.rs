//! `failurePolicy.onExhausted` `pause` and `deadLetter`, and pauses and resumes by hand, on
//! the trigger loop with a manual clock.

use prost::Message;

use super::*;
use crate::engine::{JobExtras, JobState};
use crate::proto::jobsd_api as jv1;

/// Retry once after 1 s, then `on_exhausted` (into `dead_letter`), with `catch_up`.
fn retry_once_then(on_exhausted: &str, dead_letter: &str, catch_up: &str) -> JobExtras {
    JobExtras {
        failure_policy: Some(jv1::FailurePolicy {
            kind: Some(jv1::failure_policy::Kind::Delays(jv1::DelaysRetry {
                delays: vec!["1s".into()],
                repeat_last: false,
                max_retries: None,
            })),
            on_exhausted: on_exhausted.into(),
            dead_letter_job: dead_letter.into(),
        }),
        policy: (!catch_up.is_empty()).then(|| jv1::JobPolicy {
            catch_up: catch_up.into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

impl Harness {
    async fn schedule_with(&self, name: &str, job: sv1::Job, extras: JobExtras) {
        self.engine
            .schedule_job_with(
                sv1::ScheduleJobRequest {
                    name: name.into(),
                    job: Some(job),
                    metadata: meta(),
                    overwrite: false,
                },
                extras,
            )
            .await
            .unwrap();
    }

    async fn view(&self, name: &str) -> crate::engine::JobView {
        self.engine.job_view(&meta().unwrap(), name).await.unwrap()
    }

    fn scheduled(&self, name: &str) -> Vec<DateTime<Utc>> {
        self.deliveries(name).iter().map(|d| d.scheduled).collect()
    }
}

#[tokio::test]
async fn a_spent_failure_policy_pauses_the_job_across_a_restart_until_resumed() {
    let h = Harness::new().await;
    h.answer_always("p", Failed);
    h.schedule_with(
        "p",
        every("@every 10s"),
        retry_once_then("pause", "", "latest"),
    )
    .await;
    h.run_for(TimeDelta::seconds(15)).await;
    // The tick at 10 s and its one retry, then the job is paused.
    assert_eq!(
        h.deliveries("p").iter().map(|d| d.at).collect::<Vec<_>>(),
        [secs(10), secs(11)]
    );
    h.run_for(TimeDelta::minutes(5)).await;
    assert_eq!(h.deliveries("p").len(), 2, "nothing fires while paused");
    let v = h.view("p").await;
    assert_eq!(v.status.state, Some(JobState::Paused));
    assert_eq!(
        v.status.paused_reason.as_deref(),
        Some("failure_policy_exhausted")
    );
    assert_eq!(v.status.paused_at, Some(secs(11)));
    assert_eq!(v.status.next_fire_time, None);
    assert_eq!((v.status.dropped, v.status.ticks), (1, 1));
    assert_eq!(v.status.on_exhausted.get("pause"), Some(&1));

    let h = h.restart().await;
    h.run_for(TimeDelta::minutes(5)).await;
    assert_eq!(h.deliveries("p").len(), 2, "still paused after a restart");
    assert_eq!(h.view("p").await.status.state, Some(JobState::Paused));
    assert_eq!(h.engine.sync().await.unwrap().queued, 0);

    // The ticks of 0:20–10:10 fell due while paused: counted, not run.
    assert_eq!(h.view("p").await.status.skipped.get("paused"), Some(&60));

    // Resumed at 10:15 with `catchUp: latest`: the latest of them runs, once.
    h.answer_always("p", Success);
    h.engine.resume_job(&meta().unwrap(), "p").await.unwrap();
    h.settle().await;
    assert_eq!(h.scheduled("p")[2..], [secs(610)]);
    let v = h.view("p").await;
    assert_eq!(v.status.state, Some(JobState::Active));
    assert_eq!(v.status.paused_reason, None);
    assert_eq!(v.status.skipped.get("paused"), Some(&60));
    assert_eq!(v.status.skipped.get("catch_up"), None);
    h.run_for(TimeDelta::seconds(10)).await;
    assert_eq!(h.scheduled("p")[2..], [secs(610), secs(620)]);
}

#[tokio::test]
async fn a_job_paused_by_hand_skips_the_ticks_that_fall_due_and_goes_on_after_resume() {
    let h = Harness::new().await;
    let meta = meta().unwrap();
    h.schedule("m", every("@every 10s")).await;
    h.run_for(TimeDelta::seconds(25)).await;
    assert_eq!(h.scheduled("m"), [secs(10), secs(20)]);
    h.engine.pause_job(&meta, "m", "maintenance").await.unwrap();
    let v = h.view("m").await;
    assert_eq!(v.status.state, Some(JobState::Paused));
    assert_eq!(v.status.paused_reason.as_deref(), Some("manual"));
    assert_eq!(v.status.paused_note.as_deref(), Some("maintenance"));
    assert_eq!(v.status.paused_at, Some(secs(25)));
    h.run_for(TimeDelta::seconds(60)).await;
    assert_eq!(h.deliveries("m").len(), 2);
    assert_eq!(h.view("m").await.status.skipped.get("paused"), Some(&6));
    // Resuming twice is resuming once; with Dapr's catch-up (`all`) none of the ticks that
    // fell due while paused (0:30–1:20) runs: the job goes on at 1:30.
    h.engine.resume_job(&meta, "m").await.unwrap();
    h.engine.resume_job(&meta, "m").await.unwrap();
    h.settle().await;
    assert_eq!(h.scheduled("m"), [secs(10), secs(20)]);
    let v = h.view("m").await;
    assert_eq!(v.status.state, Some(JobState::Active));
    assert_eq!(v.status.skipped.get("paused"), Some(&6));
    assert_eq!(v.status.next_fire_time, Some(secs(90)));
    h.run_for(TimeDelta::seconds(10)).await;
    assert_eq!(h.scheduled("m"), [secs(10), secs(20), secs(90)]);
    // Nothing of the kind for a job that does not exist.
    for missing in [
        h.engine.pause_job(&meta, "gone", "").await,
        h.engine.resume_job(&meta, "gone").await,
    ] {
        assert!(matches!(missing, Err(Error::NotFound(n)) if n == "gone"));
    }
    // An overwrite starts unpaused.
    h.engine.pause_job(&meta, "m", "").await.unwrap();
    h.schedule("m", every("@every 10s")).await;
    assert_eq!(h.view("m").await.status.state, Some(JobState::Active));
}

#[tokio::test]
async fn a_pause_holds_a_queued_retry_until_resumed() {
    let h = Harness::new().await;
    let meta = meta().unwrap();
    // The first attempt fails: its retry is queued when the pause comes.
    h.script("r", &[Failed]);
    h.schedule("r", every("@every 10s")).await;
    h.run_for(TimeDelta::seconds(10)).await;
    assert_eq!(h.deliveries("r").len(), 1);
    h.engine.pause_job(&meta, "r", "").await.unwrap();
    h.run_for(TimeDelta::seconds(30)).await;
    assert_eq!(h.deliveries("r").len(), 1, "the retry waits too");
    assert_eq!(h.view("r").await.status.skipped.get("paused"), Some(&3));
    h.engine.resume_job(&meta, "r").await.unwrap();
    h.settle().await;
    // The retry of the 10 s tick goes first, with its attempt number kept; then the ticks
    // that fell due while paused (20, 30, 40) are passed over.
    let d = h.deliveries("r");
    assert_eq!(d.len(), 2);
    assert_eq!((d[1].scheduled, d[1].attempt), (secs(11), 2));
    let v = h.view("r").await;
    assert_eq!(v.status.skipped.get("paused"), Some(&3));
    assert_eq!(v.status.next_fire_time, Some(secs(50)));
    h.run_for(TimeDelta::seconds(10)).await;
    assert_eq!(h.scheduled("r")[2..], [secs(50)]);
}

/// The JSON object a dead-letter delivery carries.
fn dead_letter_json(d: &Delivery) -> serde_json::Value {
    let any = d.data.as_ref().expect("dead letters carry data");
    let value = prost_types::Value::decode(any.value.as_slice()).unwrap();
    let mut text = String::new();
    crate::go::protojson::write_value(&mut text, &value).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[tokio::test]
async fn a_spent_tick_is_dead_lettered_once_and_the_job_goes_on() {
    let h = Harness::new().await;
    h.answer_always("src", Failed);
    let data = prost_types::Any {
        type_url: "t".into(),
        value: br#"{"k":"v"}"#.to_vec(),
    };
    h.schedule_with(
        "src",
        sv1::Job {
            data: Some(data),
            ..every("@every 10s")
        },
        retry_once_then("deadLetter", "dlq", ""),
    )
    .await;
    h.run_for(TimeDelta::seconds(12)).await;
    let dlq = h.deliveries("dlq");
    assert_eq!(dlq.len(), 1);
    assert_eq!(dlq[0].at, secs(11), "due when the tick was given up");
    let src = h.deliveries("src");
    let body = dead_letter_json(&dlq[0]);
    assert_eq!(body["job"], "src");
    assert_eq!(body["executionId"], src[0].execution.to_string());
    assert_eq!(body["scheduledTime"], "2026-01-01T00:00:10Z");
    assert_eq!(body["attempts"], 2);
    assert_eq!(body["data"], serde_json::json!({"k": "v"}));
    let v = h.view("src").await;
    assert_eq!(v.status.state, Some(JobState::Active));
    assert_eq!(v.status.dropped, 1);
    assert_eq!(v.status.on_exhausted.get("dead_letter"), Some(&1));
    assert_eq!(v.status.next_fire_time, Some(secs(20)));

    // Across a restart nothing is dead-lettered again; the schedule goes on.
    h.answer_always("src", Success);
    let h = h.restart().await;
    h.run_for(TimeDelta::seconds(20)).await;
    assert_eq!(h.deliveries("dlq").len(), 1);
    assert_eq!(h.scheduled("src")[2..], [secs(20), secs(30)]);
}

#[tokio::test]
async fn a_dead_letter_whose_name_is_taken_takes_the_execution_id_as_suffix() {
    let h = Harness::new().await;
    h.schedule("dlq", due("1h")).await;
    h.answer_always("src", Failed);
    h.schedule_with("src", due("10s"), retry_once_then("deadLetter", "dlq", ""))
        .await;
    h.run_for(TimeDelta::seconds(12)).await;
    let execution = h.deliveries("src")[0].execution;
    let suffixed = format!("dlq-{execution}");
    assert_eq!(h.deliveries(&suffixed).len(), 1);
    assert!(
        h.deliveries("dlq").is_empty(),
        "the existing job is left alone"
    );
    assert!(h.exists("dlq").await);
    assert_eq!(dead_letter_json(&h.deliveries(&suffixed)[0])["job"], "src");
    // A job may not dead-letter into itself.
    let err = h
        .engine
        .schedule_job_with(
            sv1::ScheduleJobRequest {
                name: "self".into(),
                job: Some(every("@every 10s")),
                metadata: meta(),
                overwrite: false,
            },
            retry_once_then("deadLetter", "self", ""),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::BadRequest(m) if m.starts_with("failurePolicy.deadLetterJob")),
        "{err:?}"
    );
}

/// A loop that takes a paused job over (a replica whose partition moved) keeps it paused:
/// the pause travels in the job's stored progress. Here it was written with no loop at all;
/// the resume then goes through the new one.
#[tokio::test]
async fn a_job_taken_over_by_another_loop_stays_paused() {
    let store: Arc<dyn Store> = Arc::new(store::Memory::new());
    let clock = ManualClock::new(t0());
    let meta = meta().unwrap();
    let writer = Engine::new(store.clone(), Arc::new(clock.clone()));
    writer
        .schedule_job(sv1::ScheduleJobRequest {
            name: "t".into(),
            job: Some(every("@every 10s")),
            metadata: Some(meta.clone()),
            overwrite: false,
        })
        .await
        .unwrap();
    writer.pause_job(&meta, "t", "moved").await.unwrap();

    let h = Harness::following(store, clock);
    h.adopt_all().await;
    h.run_for(TimeDelta::seconds(35)).await;
    assert!(h.deliveries("t").is_empty());
    assert_eq!(
        h.view("t").await.status.paused_note.as_deref(),
        Some("moved")
    );
    assert_eq!(h.view("t").await.status.skipped.get("paused"), Some(&3));
    h.engine.resume_job(&meta, "t").await.unwrap();
    h.settle().await;
    assert!(
        h.deliveries("t").is_empty(),
        "10, 20, 30 fell due while paused"
    );
    h.run_for(TimeDelta::seconds(5)).await;
    assert_eq!(h.scheduled("t"), [secs(40)]);
}

/// A bulk pause takes only the calling owner's jobs that its selection takes; another app's
/// job of the same name is left alone, and so is a job paused already (its note kept).
#[tokio::test]
async fn a_bulk_pause_takes_only_the_owners_selected_jobs() {
    use crate::engine::Selection;
    let h = Harness::new().await;
    let mine = meta().unwrap();
    let other = sv1::JobMetadata {
        app_id: "otherapp".into(),
        ..mine.clone()
    };
    for (name, team) in [("a-1", "x"), ("a-2", "y"), ("b-1", "x")] {
        let labels = [("team".to_owned(), team.to_owned())].into();
        h.schedule_with(
            name,
            every("@every 10s"),
            JobExtras {
                labels,
                ..Default::default()
            },
        )
        .await;
    }
    h.engine
        .schedule_job(sv1::ScheduleJobRequest {
            name: "a-1".into(),
            job: Some(every("@every 10s")),
            metadata: Some(other.clone()),
            overwrite: false,
        })
        .await
        .unwrap();
    h.engine.pause_job(&mine, "a-2", "first").await.unwrap();
    let by_prefix = Selection {
        name_prefix: "a-".into(),
        labels: Vec::new(),
    };
    let bulk = h
        .engine
        .pause_jobs(&mine, &by_prefix, "bulk")
        .await
        .unwrap();
    assert_eq!((bulk.count, bulk.names), (1, vec!["a-1".to_owned()]));
    assert_eq!(
        h.view("a-2").await.status.paused_note.as_deref(),
        Some("first")
    );
    let theirs = h.engine.job_view(&other, "a-1").await.unwrap();
    assert_eq!(theirs.status.state, Some(JobState::Active));
    // By label: `b-1` (team x; `a-1` is paused already).
    let by_label = Selection {
        name_prefix: String::new(),
        labels: vec![("team".into(), "x".into())],
    };
    let bulk = h.engine.pause_jobs(&mine, &by_label, "").await.unwrap();
    assert_eq!(bulk.names, ["b-1"]);
    let bulk = h
        .engine
        .resume_jobs(&mine, &Selection::default())
        .await
        .unwrap();
    assert_eq!(bulk.names, ["a-1", "a-2", "b-1"]);
    h.run_for(TimeDelta::seconds(10)).await;
    for name in ["a-1", "a-2", "b-1"] {
        assert_eq!(h.view(name).await.status.state, Some(JobState::Active));
    }
}
