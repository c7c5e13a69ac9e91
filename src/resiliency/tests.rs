//! Loading resources and running calls under policies.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use super::*;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn load(yaml: &str, app: &str) -> Resiliency {
    match Resiliency::from_yaml_str(yaml, app) {
        Ok(r) => r,
        Err(e) => panic!("load failed: {e}"),
    }
}

fn load_err(yaml: &str, app: &str) -> Error {
    match Resiliency::from_yaml_str(yaml, app) {
        Ok(_) => panic!("load succeeded:\n{yaml}"),
        Err(e) => e,
    }
}

fn policy(r: &Resiliency, app: &str) -> Arc<Policy> {
    match r.app_policy(app) {
        Some(p) => p,
        None => panic!("no policy for {app}"),
    }
}

/// A `Resiliency` document with the given policies/targets bodies (indented under `spec`).
fn doc(name: &str, scopes: &str, spec: &str) -> String {
    format!(
        "apiVersion: dapr.io/v1alpha1\nkind: Resiliency\nmetadata:\n  name: {name}\n{scopes}spec:\n{spec}"
    )
}

// ---- loading ---------------------------------------------------------------------------------

#[test]
fn loads_the_sample_config() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("config");
    let r = match Resiliency::load_dir(&dir, "myapp") {
        Ok(r) => r,
        Err(e) => panic!("{e}"),
    };
    let p = policy(&r, "myapp");
    assert_eq!(p.timeout(), Some(secs(5)));
    let retry = p.retry().cloned().unwrap_or_default();
    assert_eq!(retry.kind, RetryKind::Constant);
    assert_eq!(retry.duration, ms(200));
    assert_eq!(retry.max_retries, 3);
    assert!(p.breaker().is_some());
    // The resource is scoped to myapp.
    let other = Resiliency::load_dir(&dir, "otherapp").unwrap_or_default();
    assert!(other.is_empty());
    assert!(other.app_policy("myapp").is_none());
}

#[test]
fn sample_exponential_policy_keeps_dapr_defaults_for_unset_fields() {
    let text = include_str!("../../config/resiliency.yaml");
    let text = text.replace("retry: quickRetry", "retry: backoff");
    let p = policy(&load(&text, "myapp"), "myapp");
    let retry = p.retry().cloned().unwrap_or_default();
    assert_eq!(retry.kind, RetryKind::Exponential);
    assert_eq!(retry.initial_interval, ms(500));
    assert_eq!(retry.max_interval, secs(10));
    assert_eq!(retry.max_retries, 5);
    assert_eq!(retry.randomization_factor, 0.5);
    assert_eq!(retry.multiplier, 1.5);
    assert_eq!(retry.max_elapsed_time, secs(15 * 60));
    let matching = retry.matching.unwrap_or_default();
    assert_eq!(
        matching.http_status_codes,
        Some(vec![
            CodeRange {
                start: 500,
                end: 500
            },
            CodeRange {
                start: 502,
                end: 504
            }
        ])
    );
    assert_eq!(
        matching.grpc_status_codes,
        Some(vec![
            CodeRange { start: 2, end: 2 },
            CodeRange { start: 14, end: 14 }
        ])
    );
}

#[test]
fn loads_daprs_own_testdata() {
    let r = load(include_str!("testdata/dapr-resiliency.yaml"), "anyapp");
    let p = policy(&r, "appB");
    assert_eq!(p.timeout(), Some(secs(5)));
    let retry = p.retry().cloned().unwrap_or_default();
    assert_eq!(
        (retry.kind, retry.duration, retry.max_retries),
        (RetryKind::Constant, secs(5), 10)
    );
    assert!(p.breaker().is_some());
    // Actors and components targets are read but not applied.
    assert!(r.app_policy("myActorType").is_none());
    assert!(r.app_policy("statestore1").is_none());
}

#[test]
fn retry_defaults_match_dapr() {
    // Dapr's resiliency_test: "missingMaxRetries has no maxRetries so should default to -1",
    // noRetry keeps 0; constant duration defaults to 5 s.
    let spec = "  policies:\n    retries:\n      missing:\n        policy: constant\n      none:\n        policy: constant\n        maxRetries: 0\n  targets:\n    apps:\n      a:\n        retry: missing\n      b:\n        retry: none\n";
    let r = load(&doc("r", "", spec), "x");
    let a = policy(&r, "a").retry().cloned().unwrap_or_default();
    assert_eq!((a.max_retries, a.duration), (-1, secs(5)));
    let b = policy(&r, "b").retry().cloned().unwrap_or_default();
    assert_eq!(b.max_retries, 0);
}

#[test]
fn multi_document_files_skip_other_kinds() {
    // The component's spec has a `policies` list, which would not fit our types: each
    // document must be parsed on its own.
    let yaml = format!(
        "# leading comment\n---\napiVersion: dapr.io/v1alpha1\nkind: Component\nmetadata:\n  name: statestore\nspec:\n  type: state.redis\n  version: v1\n  policies: [1, 2]\n  metadata:\n  - name: redisHost\n    value: localhost:6379\n---\n{}...\n---\nkind: Configuration\nspec:\n  targets: 7\n",
        doc(
            "r",
            "",
            "  policies:\n    timeouts:\n      t: 2s\n  targets:\n    apps:\n      myapp:\n        timeout: t\n"
        )
    );
    let r = load(&yaml, "myapp");
    assert_eq!(policy(&r, "myapp").timeout(), Some(secs(2)));
}

#[test]
fn scopes_select_resources() {
    let body = "  policies:\n    timeouts:\n      t: 2s\n  targets:\n    apps:\n      target:\n        timeout: t\n";
    let scoped = doc("r", "scopes:\n  - app1\n  - app2\n", body);
    assert!(load(&scoped, "app2").app_policy("target").is_some());
    assert!(load(&scoped, "app3").app_policy("target").is_none());
    let empty = doc("r", "scopes: []\n", body);
    assert!(load(&empty, "app3").app_policy("target").is_some());
}

#[test]
fn targets_may_use_policies_of_other_in_scope_resources_only() {
    let policies = doc(
        "policies",
        "scopes: [other]\n",
        "  policies:\n    retries:\n      r:\n        maxRetries: 1\n",
    );
    let targets = doc(
        "targets",
        "",
        "  targets:\n    apps:\n      myapp:\n        retry: r\n",
    );
    let both = format!("{policies}---\n{targets}");
    assert!(load(&both, "other").app_policy("myapp").is_some());
    let e = load_err(&both, "myapp").to_string();
    assert!(e.contains("spec.targets.apps.myapp.retry"), "{e}");
    assert!(
        e.contains("no retry policy named \"r\" (none are defined)"),
        "{e}"
    );
}

#[test]
fn unknown_policy_names_fail_with_file_and_field() {
    let dir = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => panic!("{e}"),
    };
    let yaml = doc(
        "res",
        "",
        "  policies:\n    timeouts:\n      general: 5s\n    circuitBreakers:\n      cb: {}\n  targets:\n    apps:\n      myapp:\n        timeout: generl\n",
    );
    let file = dir.path().join("resiliency.yaml");
    if let Err(e) = std::fs::write(&file, yaml) {
        panic!("{e}");
    }
    let e = match Resiliency::load_dir(dir.path(), "myapp") {
        Ok(_) => panic!("loaded"),
        Err(e) => e,
    };
    let text = e.to_string();
    assert!(text.contains(&file.display().to_string()), "{text}");
    assert!(text.contains("Resiliency \"res\""), "{text}");
    assert!(text.contains("spec.targets.apps.myapp.timeout"), "{text}");
    assert!(
        text.contains("no timeout policy named \"generl\" (defined: general)"),
        "{text}"
    );

    let yaml = doc(
        "res",
        "",
        "  targets:\n    apps:\n      myapp:\n        circuitBreaker: nope\n",
    );
    let e = load_err(&yaml, "myapp").to_string();
    assert!(e.contains("spec.targets.apps.myapp.circuitBreaker"), "{e}");
}

#[test]
fn bad_durations_fail_with_the_field() {
    for (spec, field) in [
        (
            "  policies:\n    timeouts:\n      general: 5 s\n",
            "spec.policies.timeouts.general",
        ),
        (
            "  policies:\n    timeouts:\n      general: 1d\n",
            "spec.policies.timeouts.general",
        ),
        (
            "  policies:\n    timeouts:\n      general: -5s\n",
            "spec.policies.timeouts.general",
        ),
        (
            "  policies:\n    retries:\n      r:\n        duration: fast\n",
            "spec.policies.retries.r.duration",
        ),
        (
            "  policies:\n    retries:\n      r:\n        policy: exponential\n        maxInterval: 10x\n",
            "spec.policies.retries.r.maxInterval",
        ),
        (
            "  policies:\n    circuitBreakers:\n      cb:\n        timeout: soon\n",
            "spec.policies.circuitBreakers.cb.timeout",
        ),
        (
            "  policies:\n    circuitBreakers:\n      cb:\n        interval: \"9223372036854775807\"\n",
            "spec.policies.circuitBreakers.cb.interval",
        ),
    ] {
        let e = load_err(&doc("r", "", spec), "a").to_string();
        assert!(e.contains(field), "{spec}: {e}");
    }
}

#[test]
fn durations_accept_go_syntax_and_bare_milliseconds() {
    let spec = "  policies:\n    timeouts:\n      a: 1m30s\n      b: \"1500\"\n      c: 250\n      d: .5s\n      e: 0\n  targets:\n    apps:\n      a:\n        timeout: a\n      b:\n        timeout: b\n      c:\n        timeout: c\n      d:\n        timeout: d\n      e:\n        timeout: e\n";
    let r = load(&doc("r", "", spec), "x");
    let t = |app| policy(&r, app).timeout();
    assert_eq!(t("a"), Some(secs(90)));
    assert_eq!(t("b"), Some(ms(1500)));
    assert_eq!(t("c"), Some(ms(250)));
    assert_eq!(t("d"), Some(ms(500)));
    assert_eq!(t("e"), None, "a zero timeout is no timeout, as in Dapr");
}

#[test]
fn bad_status_code_lists_fail() {
    for (matching, needle) in [
        ("httpStatusCodes: \"399-299\"", "start is bigger than end"),
        ("httpStatusCodes: \"1,2,3\"", "not in 100-599"),
        ("httpStatusCodes: \"500-502-504\"", "more than one '-'"),
        ("httpStatusCodes: \"abc\"", "is not a number"),
        ("httpStatusCodes: \"500, 502\"", "is not a number"),
        ("gRPCStatusCodes: \"17\"", "not in 0-16"),
        ("gRPCStatusCodes: \"-1\"", "is not a number"),
    ] {
        let spec = format!(
            "  policies:\n    retries:\n      r:\n        matching:\n          {matching}\n"
        );
        let e = load_err(&doc("r", "", &spec), "a").to_string();
        assert!(e.contains("spec.policies.retries.r.matching."), "{e}");
        assert!(e.contains(needle), "{matching}: {e}");
    }
}

#[test]
fn status_code_lists_parse_like_dapr() {
    let spec = "  policies:\n    retries:\n      r:\n        matching:\n          httpStatusCodes: \"200,201,202,203,204,300-309,400,500,505-509,\"\n          gRPCStatusCodes: \"\"\n  targets:\n    apps:\n      a:\n        retry: r\n";
    let r = load(&doc("r", "", spec), "x");
    let m = policy(&r, "a")
        .retry()
        .and_then(|r| r.matching.clone())
        .unwrap_or_default();
    // Dapr's TestRetryOnHttpCode table.
    for (code, want) in [
        (200, true),
        (204, true),
        (300, true),
        (310, false),
        (400, true),
        (500, true),
        (509, true),
    ] {
        assert_eq!(
            m.is_retryable(&Failure::http(code, "x")),
            want,
            "HTTP {code}"
        );
    }
    // An empty gRPC list retries every gRPC code.
    assert!(m.is_retryable(&Failure::grpc(3, "x")));
    // No code at all: not filtered.
    assert!(m.is_retryable(&Failure::other("connection refused")));
}

#[test]
fn trip_errors_fail_at_load() {
    for (trip, needle) in [
        ("consecutiveFailure > 5", "unknown variable"),
        ("consecutiveFailures >", "not valid CEL"),
        ("requests", "must evaluate to a bool"),
    ] {
        let spec = format!("  policies:\n    circuitBreakers:\n      cb:\n        trip: {trip}\n");
        let e = load_err(&doc("r", "", &spec), "a").to_string();
        assert!(e.contains("spec.policies.circuitBreakers.cb.trip"), "{e}");
        assert!(e.contains(needle), "{trip}: {e}");
    }
}

#[test]
fn other_invalid_retry_fields_fail() {
    for (field, needle) in [
        ("policy: linear", "spec.policies.retries.r.policy"),
        ("maxRetries: -2", "spec.policies.retries.r.maxRetries"),
        ("multiplier: 0.5", "spec.policies.retries.r.multiplier"),
        (
            "randomizationFactor: 1.5",
            "spec.policies.retries.r.randomizationFactor",
        ),
    ] {
        let spec = format!("  policies:\n    retries:\n      r:\n        {field}\n");
        let e = load_err(&doc("r", "", &spec), "a").to_string();
        assert!(e.contains(needle), "{field}: {e}");
    }
    // Case does not matter, as in dapr/kit.
    let spec = "  policies:\n    retries:\n      r:\n        policy: Exponential\n  targets:\n    apps:\n      a:\n        retry: r\n";
    let r = load(&doc("r", "", spec), "x");
    assert_eq!(
        policy(&r, "a").retry().map(|r| r.kind),
        Some(RetryKind::Exponential)
    );
}

#[test]
fn yaml_type_errors_name_the_line() {
    let spec = "  policies:\n    retries:\n      r:\n        maxRetries: notanumber\n";
    match load_err(&doc("r", "", spec), "a") {
        Error::Yaml {
            file,
            document,
            message,
        } => {
            assert_eq!((file.as_str(), document), ("<memory>", 1));
            assert!(message.contains("line 9"), "{message}");
        }
        other => panic!("{other}"),
    }
    // Line numbers count from the top of the file, not of the document.
    let two = format!(
        "kind: Component\nmetadata:\n  name: c\n---\n{}",
        doc("r", "", spec)
    );
    match load_err(&two, "a") {
        Error::Yaml {
            document, message, ..
        } => {
            assert_eq!(document, 2);
            assert!(message.contains("line 13"), "{message}");
        }
        other => panic!("{other}"),
    }
}

#[test]
fn load_dir_reads_yaml_files_in_name_order() {
    let dir = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => panic!("{e}"),
    };
    let write = |name: &str, text: &str| {
        if let Err(e) = std::fs::write(dir.path().join(name), text) {
            panic!("{e}");
        }
    };
    let timeout = |t: &str| {
        doc(
            "r",
            "",
            &format!(
                "  policies:\n    timeouts:\n      t: {t}\n  targets:\n    apps:\n      a:\n        timeout: t\n"
            ),
        )
    };
    write("a.yaml", &timeout("1s"));
    write("b.YML", &timeout("2s"));
    write("c.txt", "not: [yaml");
    write(
        "component.yaml",
        "apiVersion: dapr.io/v1alpha1\nkind: Component\nmetadata:\n  name: c\n",
    );
    if let Err(e) = std::fs::create_dir(dir.path().join("sub.yaml")) {
        panic!("{e}");
    }
    let r = match Resiliency::load_dir(dir.path(), "x") {
        Ok(r) => r,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(
        policy(&r, "a").timeout(),
        Some(secs(2)),
        "b.YML comes after a.yaml"
    );

    let missing = Resiliency::load_dir(&dir.path().join("nope"), "x");
    assert!(missing.is_ok_and(|r| r.is_empty()));
}

#[test]
fn default_policies_apply_to_apps_without_a_target() {
    let spec = "  policies:\n    retries:\n      DefaultRetryPolicy:\n        maxRetries: 1\n      DefaultAppRetryPolicy:\n        maxRetries: 2\n    timeouts:\n      DefaultTimeoutPolicy: 3s\n    circuitBreakers:\n      DefaultCircuitBreakerPolicy: {}\n      named: {}\n  targets:\n    apps:\n      named:\n        circuitBreaker: named\n";
    let r = load(&doc("r", "", spec), "x");
    let p = policy(&r, "someapp");
    assert_eq!(p.retry().map(|r| r.max_retries), Some(2), "App level first");
    assert_eq!(p.timeout(), Some(secs(3)));
    assert!(p.breaker().is_some());
    assert!(
        Arc::ptr_eq(&p, &policy(&r, "someapp")),
        "same breaker every call"
    );
    assert!(!Arc::ptr_eq(&p, &policy(&r, "another")));
    // A named target gets only what it names.
    let named = policy(&r, "named");
    assert!(named.retry().is_none() && named.timeout().is_none());
}

#[test]
fn empty_and_odd_inputs_load_nothing() {
    for yaml in [
        "",
        "# only a comment\n",
        "---\n---\n",
        "kind: Component\n",
        "kind: 5\n",
        "kind: Resiliency\n",
        "kind: Resiliency\nspec: {}\n",
        "\u{feff}kind: Resiliency\n",
    ] {
        assert!(load(yaml, "a").is_empty(), "{yaml:?}");
    }
    assert!(Resiliency::from_yaml_str("[unclosed", "a").is_err());
    assert!(Resiliency::from_yaml_str("- a\n- b\n", "a").is_err());
}

// ---- running calls ---------------------------------------------------------------------------

fn constant(duration: Duration, max_retries: i64) -> RetryConfig {
    RetryConfig {
        kind: RetryKind::Constant,
        duration,
        max_retries,
        ..Default::default()
    }
}

fn trip_after(failures: u32) -> BreakerSettings {
    let trip = match Trip::compile(&format!("consecutiveFailures >= {failures}")) {
        Ok(t) => t,
        Err(e) => panic!("{e}"),
    };
    BreakerSettings {
        timeout: secs(30),
        trip: Some(Arc::new(trip)),
        ..Default::default()
    }
}

/// An operation that fails with `failure(n)` for its first `fail` calls (n from 1), then
/// succeeds with the call number; counts calls in `calls`.
fn flaky(
    calls: &AtomicU32,
    fail: u32,
    failure: impl Fn(u32) -> Failure + Send + Sync,
) -> impl FnMut() -> std::future::Ready<Result<u32, Failure>> + Send {
    move || {
        let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
        std::future::ready(if n <= fail { Err(failure(n)) } else { Ok(n) })
    }
}

#[tokio::test(start_paused = true)]
async fn retries_then_succeeds() {
    let p = Policy::new("t", None, Some(constant(ms(200), 3)), None);
    let calls = AtomicU32::new(0);
    let start = Instant::now();
    let got = p
        .execute(flaky(&calls, 2, |n| Failure::http(503, format!("try {n}"))))
        .await;
    assert_eq!(got, Ok(3));
    assert_eq!(start.elapsed(), ms(400), "two constant delays");
}

#[tokio::test(start_paused = true)]
async fn returns_the_last_failure_when_retries_run_out() {
    let p = Policy::new("t", None, Some(constant(ms(10), 3)), None);
    let calls = AtomicU32::new(0);
    let got = p
        .execute(flaky(&calls, u32::MAX, |n| {
            Failure::http(500, format!("try {n}"))
        }))
        .await;
    assert_eq!(got, Err(PolicyError::Failed(Failure::http(500, "try 4"))));
    assert_eq!(calls.load(Ordering::SeqCst), 4, "1 attempt + 3 retries");
}

#[tokio::test(start_paused = true)]
async fn without_retry_policy_one_attempt() {
    let p = Policy::new("t", None, None, None);
    let calls = AtomicU32::new(0);
    let got = p
        .execute(flaky(&calls, 1, |_| Failure::other("refused")))
        .await;
    assert_eq!(got, Err(PolicyError::Failed(Failure::other("refused"))));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn zero_max_retries_means_one_attempt() {
    let p = Policy::new("t", None, Some(constant(ms(10), 0)), None);
    let calls = AtomicU32::new(0);
    let got = p.execute(flaky(&calls, 1, |_| Failure::other("x"))).await;
    assert!(got.is_err());
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn timeout_per_attempt_counts_as_failure_and_is_retried() {
    let p = Policy::new(
        "t",
        Some(secs(1)),
        Some(constant(ms(100), 2)),
        Some(&BreakerSettings::default()),
    );
    let calls = AtomicU32::new(0);
    let start = Instant::now();
    let got: Result<(), _> = p
        .execute(|| {
            calls.fetch_add(1, Ordering::SeqCst);
            async {
                tokio::time::sleep(secs(3600)).await;
                Ok(())
            }
        })
        .await;
    assert_eq!(got, Err(PolicyError::Timeout));
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert_eq!(start.elapsed(), secs(3) + ms(200));
    let counts = p.breaker().map(|b| b.counts()).unwrap_or_default();
    assert_eq!(
        (counts.requests, counts.total_failures),
        (3, 3),
        "the breaker saw each timed-out attempt"
    );
}

#[tokio::test(start_paused = true)]
async fn a_slow_first_attempt_then_a_fast_one_succeeds() {
    let p = Policy::new("t", Some(secs(1)), Some(constant(ms(100), 2)), None);
    let calls = AtomicU32::new(0);
    let got = p
        .execute(|| {
            let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
            async move {
                if n == 1 {
                    tokio::time::sleep(secs(2)).await;
                }
                Ok::<_, Failure>(n)
            }
        })
        .await;
    assert_eq!(got, Ok(2));
}

#[tokio::test(start_paused = true)]
async fn matching_retries_only_listed_codes() {
    let mut retry = constant(ms(10), 5);
    retry.matching = Some(Matching {
        http_status_codes: Some(vec![
            CodeRange {
                start: 500,
                end: 500,
            },
            CodeRange {
                start: 502,
                end: 504,
            },
        ]),
        grpc_status_codes: Some(vec![
            CodeRange { start: 2, end: 2 },
            CodeRange { start: 14, end: 14 },
        ]),
    });
    let p = Policy::new("t", Some(secs(1)), Some(retry), None);
    let run = |failure: Failure| {
        let p = &p;
        async move {
            let calls = AtomicU32::new(0);
            let got = p.execute(flaky(&calls, 1, move |_| failure.clone())).await;
            (got, calls.load(Ordering::SeqCst))
        }
    };
    // Not listed: the failure comes back after one attempt.
    assert_eq!(
        run(Failure::http(404, "nope")).await,
        (Err(PolicyError::Failed(Failure::http(404, "nope"))), 1)
    );
    assert_eq!(run(Failure::grpc(5, "nf")).await.1, 1);
    // Listed: retried.
    assert_eq!(run(Failure::http(503, "busy")).await, (Ok(2), 2));
    assert_eq!(run(Failure::grpc(14, "unavailable")).await, (Ok(2), 2));
    // No status (transport error): matching does not filter it.
    assert_eq!(run(Failure::other("connection reset")).await, (Ok(2), 2));
    // A timeout has no status either: retried.
    let calls = AtomicU32::new(0);
    let got = p
        .execute(|| {
            let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
            async move {
                if n == 1 {
                    tokio::time::sleep(secs(5)).await;
                }
                Ok::<_, Failure>(n)
            }
        })
        .await;
    assert_eq!(got, Ok(2));
}

#[tokio::test(start_paused = true)]
async fn open_breaker_fails_fast_without_calling_op() {
    let p = Policy::new("t", None, None, Some(&trip_after(1)));
    let calls = AtomicU32::new(0);
    let first = p
        .execute(flaky(&calls, 1, |_| Failure::http(500, "down")))
        .await;
    assert_eq!(first, Err(PolicyError::Failed(Failure::http(500, "down"))));
    let second = p.execute(flaky(&calls, 0, |_| Failure::other("x"))).await;
    assert_eq!(second, Err(PolicyError::CircuitOpen));
    assert_eq!(calls.load(Ordering::SeqCst), 1, "op not called while open");
}

#[tokio::test(start_paused = true)]
async fn breaker_opening_ends_the_retry_loop() {
    let p = Policy::new("t", None, Some(constant(ms(10), -1)), Some(&trip_after(3)));
    let calls = AtomicU32::new(0);
    let got = p
        .execute(flaky(&calls, u32::MAX, |_| Failure::http(500, "down")))
        .await;
    assert_eq!(got, Err(PolicyError::CircuitOpen));
    assert_eq!(
        calls.load(Ordering::SeqCst),
        3,
        "retry-forever stops at the open breaker"
    );
}

#[tokio::test(start_paused = true)]
async fn half_open_after_breaker_timeout_then_success_closes() {
    let p = Policy::new("t", None, None, Some(&trip_after(1)));
    let calls = AtomicU32::new(0);
    let _ = p
        .execute(flaky(&calls, 1, |_| Failure::other("down")))
        .await;
    assert_eq!(
        p.execute(flaky(&calls, 0, |_| Failure::other("x"))).await,
        Err(PolicyError::CircuitOpen)
    );
    tokio::time::advance(secs(31)).await;
    assert_eq!(
        p.breaker().map(|b| b.state(Instant::now().into_std())),
        Some(State::HalfOpen)
    );
    let got = p.execute(flaky(&calls, 0, |_| Failure::other("x"))).await;
    assert_eq!(got, Ok(2));
    assert_eq!(
        p.breaker().map(|b| b.state(Instant::now().into_std())),
        Some(State::Closed)
    );
}

#[tokio::test(start_paused = true)]
async fn half_open_allows_max_requests_concurrently() {
    let p = Arc::new(Policy::new("t", None, None, Some(&trip_after(1))));
    let _ = p
        .execute(|| async { Err::<(), _>(Failure::other("down")) })
        .await;
    tokio::time::advance(secs(31)).await;
    let (release, wait) = tokio::sync::oneshot::channel::<()>();
    let trial = tokio::spawn({
        let p = p.clone();
        async move {
            let mut wait = Some(wait);
            p.execute(move || {
                let wait = wait.take();
                async move {
                    if let Some(w) = wait {
                        let _ = w.await;
                    }
                    Ok::<_, Failure>(())
                }
            })
            .await
        }
    });
    tokio::task::yield_now().await;
    let second = p.execute(|| async { Ok::<_, Failure>(()) }).await;
    assert_eq!(second, Err(PolicyError::TooManyRequests));
    let _ = release.send(());
    assert!(matches!(trial.await, Ok(Ok(()))));
}

#[tokio::test(start_paused = true)]
async fn a_dropped_call_does_not_wedge_a_half_open_breaker() {
    let p = Policy::new("t", None, None, Some(&trip_after(1)));
    let _ = p
        .execute(|| async { Err::<(), _>(Failure::other("down")) })
        .await;
    tokio::time::advance(secs(31)).await;
    // The caller gives up on the trial call.
    let hung = p.execute(|| async {
        std::future::pending::<()>().await;
        Ok::<(), Failure>(())
    });
    assert!(tokio::time::timeout(secs(1), hung).await.is_err());
    let now = || Instant::now().into_std();
    assert_eq!(p.breaker().map(|b| b.state(now())), Some(State::Open));
    tokio::time::advance(secs(31)).await;
    assert_eq!(
        p.execute(|| async { Ok::<_, Failure>(7) }).await,
        Ok(7),
        "a new trial is admitted after the next timeout"
    );
}

#[tokio::test(start_paused = true)]
async fn exponential_stops_at_max_elapsed_time() {
    let retry = RetryConfig {
        kind: RetryKind::Exponential,
        initial_interval: secs(1),
        randomization_factor: 0.0,
        multiplier: 2.0,
        max_elapsed_time: secs(10),
        ..Default::default()
    };
    let p = Policy::new("t", None, Some(retry), None);
    let calls = AtomicU32::new(0);
    let start = Instant::now();
    let got = p
        .execute(flaky(&calls, u32::MAX, |_| Failure::other("x")))
        .await;
    assert!(got.is_err());
    // Delays 1, 2, 4 (elapsed 7); the next (8) would pass 10 s.
    assert_eq!(calls.load(Ordering::SeqCst), 4);
    assert_eq!(start.elapsed(), secs(7));
}

#[tokio::test(start_paused = true)]
async fn jitter_is_deterministic_with_a_seed() {
    async fn delays(seed: u64) -> Vec<Duration> {
        let retry = RetryConfig {
            kind: RetryKind::Exponential,
            max_retries: 6,
            ..Default::default()
        };
        let p = Policy::new("t", None, Some(retry), None).with_rng_seed(seed);
        let last = std::sync::Mutex::new(Instant::now());
        let seen = std::sync::Mutex::new(Vec::new());
        let _ = p
            .execute(|| {
                let now = Instant::now();
                if let (Ok(mut last), Ok(mut seen)) = (last.lock(), seen.lock()) {
                    seen.push(now - *last);
                    *last = now;
                }
                std::future::ready(Err::<(), _>(Failure::other("x")))
            })
            .await;
        seen.into_inner().unwrap_or_default()
    }
    let a = delays(11).await;
    assert_eq!(a.len(), 7);
    assert_eq!(a, delays(11).await);
    assert_ne!(a, delays(12).await);
    for (i, d) in a.iter().skip(1).enumerate() {
        let interval = 0.5 * 1.5f64.powi(i as i32);
        let d = d.as_secs_f64();
        assert!(
            d >= interval * 0.5 - 1e-3 && d <= interval * 1.5 + 1e-3,
            "{i}: {d}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_failure_is_never_swallowed() {
    // Whatever the policy, an operation that always fails never yields Ok, and the error is
    // the operation's (or the breaker's / the timeout's), never a success.
    let retries = [
        None,
        Some(constant(ms(1), 0)),
        Some(constant(ms(1), 3)),
        Some(RetryConfig {
            kind: RetryKind::Exponential,
            max_retries: 4,
            ..Default::default()
        }),
    ];
    for retry in retries {
        for breaker in [None, Some(BreakerSettings::default()), Some(trip_after(2))] {
            for timeout in [None, Some(ms(50))] {
                let p = Policy::new("t", timeout, retry.clone(), breaker.as_ref());
                let calls = AtomicU32::new(0);
                let got = p
                    .execute(flaky(&calls, u32::MAX, |n| {
                        Failure::grpc(14, format!("try {n}"))
                    }))
                    .await;
                let n = calls.load(Ordering::SeqCst);
                match got {
                    Err(PolicyError::Failed(f)) => assert_eq!(f.message, format!("try {n}")),
                    Err(PolicyError::CircuitOpen) => assert!(n >= 2),
                    other => panic!("{retry:?} {breaker:?} {timeout:?}: {other:?}"),
                }
            }
        }
    }
}

#[test]
fn errors_display_clearly() {
    assert_eq!(
        PolicyError::Failed(Failure::http(503, "app answered")).to_string(),
        "app answered (HTTP status 503)"
    );
    assert_eq!(
        PolicyError::Failed(Failure::grpc(14, "unavailable")).to_string(),
        "unavailable (gRPC code 14)"
    );
    assert!(PolicyError::CircuitOpen.to_string().contains("open"));
    assert!(PolicyError::Timeout.to_string().contains("timed out"));
}

#[test]
fn execute_future_is_send() {
    fn assert_send<T: Send>(_: T) {}
    let p = Policy::new("t", None, None, None);
    assert_send(p.execute(|| async { Ok::<_, Failure>(1) }));
}

#[test]
fn mutated_inputs_never_panic() {
    // A small deterministic stand-in for the `resiliency_yaml` fuzz target: byte-level
    // mutations of real resources must load or fail, never panic.
    let seeds = [
        include_str!("../../config/resiliency.yaml"),
        include_str!("testdata/dapr-resiliency.yaml"),
    ];
    let alphabet = b" \n-:#'\"[]{},.&*!|>?%@`0123456789abcxyz\t\r";
    let mut rng = fastrand::Rng::with_seed(0x5eed);
    for i in 0..600 {
        let mut bytes = seeds[i % seeds.len()].as_bytes().to_vec();
        for _ in 0..rng.usize(1..8) {
            let at = rng.usize(..bytes.len());
            match rng.u8(..3) {
                0 => bytes[at] = alphabet[rng.usize(..alphabet.len())],
                1 => bytes.insert(at, alphabet[rng.usize(..alphabet.len())]),
                _ => {
                    bytes.remove(at);
                }
            }
        }
        let text = String::from_utf8_lossy(&bytes);
        if let Ok(r) = Resiliency::from_yaml_str(&text, "myapp") {
            let _ = r.app_policy("myapp");
        }
    }
}
