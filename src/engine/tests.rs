use std::sync::Arc;

use chrono::{TimeZone, Utc};
use tonic::Code;

use super::*;
use crate::clock::ManualClock;
use crate::proto::dapr_scheduler::job_target_metadata::Type as Target;

/// The engine's error as the Scheduler reports it (the codes daprd maps to HTTP statuses).
fn wire(err: Error) -> crate::seam::Error {
    err.into()
}

fn engine() -> Engine {
    let clock = ManualClock::new(Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap());
    Engine::new(Arc::new(store::Memory::new()), Arc::new(clock))
}

fn meta(app: &str) -> Option<sv1::JobMetadata> {
    Some(sv1::JobMetadata {
        app_id: app.into(),
        namespace: "default".into(),
        target: Some(sv1::JobTargetMetadata {
            r#type: Some(Target::Job(sv1::TargetJob {})),
        }),
        concurrency_key: None,
    })
}

fn schedule(name: &str, job: sv1::Job, overwrite: bool) -> sv1::ScheduleJobRequest {
    sv1::ScheduleJobRequest {
        name: name.into(),
        job: Some(job),
        metadata: meta("myapp"),
        overwrite,
    }
}

fn daily() -> sv1::Job {
    sv1::Job {
        schedule: Some("@daily".into()),
        ..Default::default()
    }
}

async fn get(e: &Engine, name: &str) -> Result<sv1::Job, Error> {
    e.get_job(sv1::GetJobRequest {
        name: name.into(),
        metadata: meta("myapp"),
    })
    .await
}

#[tokio::test]
async fn create_only_unless_overwrite() {
    let e = engine();
    e.schedule_job(schedule("j", daily(), false)).await.unwrap();
    let other = sv1::Job {
        schedule: Some("@hourly".into()),
        ..Default::default()
    };
    let err = wire(
        e.schedule_job(schedule("j", other.clone(), false))
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, Code::AlreadyExists);
    assert_eq!(err.message, "job already exists: 'app||default||myapp||j'");
    assert_eq!(
        get(&e, "j").await.unwrap().schedule.as_deref(),
        Some("@daily")
    );

    e.schedule_job(schedule("j", other, true)).await.unwrap();
    assert_eq!(
        get(&e, "j").await.unwrap().schedule.as_deref(),
        Some("@hourly")
    );
}

#[tokio::test]
async fn stored_job_keeps_strings_and_gets_default_policy() {
    let e = engine();
    let job = sv1::Job {
        schedule: Some("@every 1m".into()),
        repeats: Some(123),
        due_time: Some("1000s".into()),
        ttl: Some("123s".into()),
        ..Default::default()
    };
    e.schedule_job(schedule("j", job.clone(), false))
        .await
        .unwrap();
    let got = get(&e, "j").await.unwrap();
    assert_eq!(
        got,
        sv1::Job {
            failure_policy: Some(convert::default_failure_policy()),
            ..job
        }
    );
}

#[tokio::test]
async fn validation_errors_are_unknown_with_dapr_text() {
    let e = engine();
    let bad = sv1::Job {
        schedule: Some("* * *".into()),
        ..Default::default()
    };
    let err = wire(e.schedule_job(schedule("j", bad, false)).await.unwrap_err());
    assert_eq!(err.code, Code::Unknown);
    assert_eq!(
        err.message,
        "job failed validation: expected exactly 6 fields, found 3: [* * *]"
    );
    let err = wire(
        e.schedule_job(schedule("bad/name", daily(), false))
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, Code::Unknown);
    let err = wire(
        e.schedule_job(sv1::ScheduleJobRequest {
            metadata: None,
            ..schedule("j", daily(), false)
        })
        .await
        .unwrap_err(),
    );
    assert_eq!(err.code, Code::InvalidArgument);
}

#[tokio::test]
async fn get_missing_is_not_found_and_delete_missing_is_ok() {
    let e = engine();
    let err = wire(get(&e, "nope").await.unwrap_err());
    assert_eq!(err.code, Code::NotFound);
    assert_eq!(err.message, "job not found: nope");
    e.delete_job(sv1::DeleteJobRequest {
        name: "nope".into(),
        metadata: meta("myapp"),
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn list_and_delete_by_prefix_see_only_the_owner() {
    let e = engine();
    for name in ["a1", "a2", "b1"] {
        e.schedule_job(schedule(name, daily(), false))
            .await
            .unwrap();
    }
    e.schedule_job(sv1::ScheduleJobRequest {
        metadata: meta("myapp2"),
        ..schedule("a3", daily(), false)
    })
    .await
    .unwrap();

    let names = |jobs: Vec<sv1::NamedJob>| jobs.into_iter().map(|j| j.name).collect::<Vec<_>>();
    let list = e
        .list_jobs(sv1::ListJobsRequest {
            metadata: meta("myapp"),
        })
        .await
        .unwrap();
    assert_eq!(names(list), ["a1", "a2", "b1"]);

    e.delete_by_name_prefix(sv1::DeleteByNamePrefixRequest {
        name_prefix: "a".into(),
        metadata: meta("myapp"),
    })
    .await
    .unwrap();
    let list = e
        .list_jobs(sv1::ListJobsRequest {
            metadata: meta("myapp"),
        })
        .await
        .unwrap();
    assert_eq!(names(list), ["b1"]);
    let other = e
        .list_jobs(sv1::ListJobsRequest {
            metadata: meta("myapp2"),
        })
        .await
        .unwrap();
    assert_eq!(names(other), ["a3"]);

    e.delete_by_name_prefix(sv1::DeleteByNamePrefixRequest {
        name_prefix: String::new(),
        metadata: meta("myapp"),
    })
    .await
    .unwrap();
    let list = e
        .list_jobs(sv1::ListJobsRequest {
            metadata: meta("myapp"),
        })
        .await
        .unwrap();
    assert!(list.is_empty());
}

#[tokio::test]
async fn reminders_of_an_empty_actor_id_are_named_as_daprs_scheduler_names_them() {
    // The key keeps the id's empty place (`actorreminder||default||T||||r||x`); listing the
    // type names the reminder `r||x` (daprd 1.18.2, e2e/dapr/differential.sh).
    let e = engine();
    let actor = |id: &str| {
        Some(sv1::JobMetadata {
            target: Some(sv1::JobTargetMetadata {
                r#type: Some(Target::Actor(sv1::TargetActorReminder {
                    id: id.into(),
                    r#type: "T".into(),
                })),
            }),
            ..meta("myapp").unwrap()
        })
    };
    for (id, name) in [("", "r||x"), ("1", "s")] {
        e.schedule_job(sv1::ScheduleJobRequest {
            metadata: actor(id),
            ..schedule(name, daily(), false)
        })
        .await
        .unwrap();
    }
    let list = e
        .list_jobs(sv1::ListJobsRequest {
            metadata: actor(""),
        })
        .await
        .unwrap();
    let mut names: Vec<_> = list.into_iter().map(|j| j.name).collect();
    names.sort();
    assert_eq!(names, ["r||x", "s"]);
    let got = e
        .get_job(sv1::GetJobRequest {
            name: "r||x".into(),
            metadata: actor(""),
        })
        .await;
    assert!(got.is_ok(), "{got:?}");
}

#[tokio::test]
async fn extras_are_stored_beside_the_dapr_job_and_never_shown_by_get() {
    let store = Arc::new(store::Memory::new());
    let clock = ManualClock::new(Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap());
    let e = Engine::new(store.clone(), Arc::new(clock));
    let extras = JobExtras {
        labels: [("team".to_owned(), "billing".to_owned())].into(),
        traceparent: Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into()),
        ..JobExtras::default()
    };
    e.schedule_job_with(schedule("j", daily(), false), extras)
        .await
        .unwrap();
    let stored = store
        .get_job("app||default||myapp||j")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        stored.labels.get("team").map(String::as_str),
        Some("billing")
    );
    assert!(stored.traceparent.starts_with("00-0af7651916cd43dd"));
    let mut want = daily();
    want.failure_policy = Some(convert::default_failure_policy());
    assert_eq!(
        get(&e, "j").await.unwrap(),
        want,
        "Dapr's GET shows Dapr's job only"
    );
}
