//! A request fuzzer against an in-process sidecar: thousands of generated HTTP requests
//! (methods, Dapr's and jobsd's routes with odd segments and encodings, headers, bodies from
//! valid to garbage) and gRPC messages (Dapr's jobs rpcs as typed messages, every method of the
//! API port as raw or field-shaped protobuf). Every case must end in an answer, without a
//! panic anywhere in the process, without a 5xx where daprd answers 4xx, and a refused request
//! must leave the jobs as they were.
//!
//! The seed is printed (`PROPTEST_RNG_SEED=… cargo test --test hostile_requests` replays a
//! run); failing cases are also kept in `proptest-regressions/`. `PROPTEST_CASES` overrides
//! the number of cases.

mod common;

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::{Buf, BufMut};
use common::running::Running;
use common::{sidecar_config, t0, try_http};
use jobsd::clock::ManualClock;
use jobsd::config::AppProtocol;
use jobsd::proto::runtime::{self as rv1, dapr_client::DaprClient};
use jobsd::store;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestRunner};
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};

/// Panics anywhere in this process (server tasks included) since the hook was set.
static PANICS: AtomicUsize = AtomicUsize::new(0);

/// Counts panics, then lets the default hook print them. Nothing in the servers catches a
/// panic (no catch-panic layer): a handler that panics drops its connection, and this count
/// is how the fuzzer sees it even when the client saw only a closed socket.
fn count_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICS.fetch_add(1, Ordering::SeqCst);
            default(info);
        }));
    });
}

/// The runner's settings: a printed seed (random unless `PROPTEST_RNG_SEED` is set) and
/// `cases` unless `PROPTEST_CASES` says otherwise.
fn runner(what: &str, cases: u32) -> TestRunner {
    let mut config = Config::default();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = cases;
    }
    if matches!(config.rng_seed, RngSeed::Random) {
        config.rng_seed = RngSeed::Fixed(fastrand::u64(..));
    }
    config.failure_persistence = Some(Box::new(
        proptest::test_runner::FileFailurePersistence::Direct(
            "proptest-regressions/hostile_requests.txt",
        ),
    ));
    // Shrinking replays the server; a few hundred steps find a small case without taking
    // minutes.
    config.max_shrink_iters = 300;
    // Straight to stderr, past the test harness's capture, so that CI logs show the seed of
    // every run, passed or failed.
    let _ = writeln!(
        std::io::stderr(),
        "{what}: {} cases, PROPTEST_RNG_SEED={}",
        config.cases,
        config.rng_seed
    );
    TestRunner::new(config)
}

/// Jobs present before every case, so that deletes and overwrites have something to hit.
const SEEDED: [&str; 3] = ["keep-a", "keep-b", "keep||c"];

async fn sidecar() -> Running {
    let mut cfg = sidecar_config(None, AppProtocol::Http, &[]);
    // Small enough that the fuzzer reaches it, as a real 4 MiB limit would be reached.
    cfg.max_body_size = 64 << 10;
    let r = Running::start(cfg, Arc::new(store::Memory::new()), ManualClock::new(t0())).await;
    for name in SEEDED {
        let path = format!("/v1.0-alpha1/jobs/{}", name.replace('|', "%7C"));
        let resp = try_http(
            r.api,
            "POST",
            &path,
            &[],
            br#"{"schedule":"@every 1h","data":{"k":1}}"#,
        )
        .await
        .unwrap();
        assert_eq!(resp.status, 204, "{}", resp.text());
    }
    r
}

/// What a caller can see of the jobs: Dapr's list, and jobsd's view of each seeded job.
async fn snapshot(r: &Running) -> String {
    // Work an earlier accepted case started (a job due now fires, fails at the absent app and
    // is dropped) must be over first, or it would show as the refused call's change.
    common::clockwork::settle(r.sidecar.engine().unwrap(), &r.clock).await;
    // Through gRPC: its binary answer holds every job, while HTTP's JSON fails whole (as
    // daprd's) once an accepted case stored `data` whose Any type cannot be resolved.
    let mut client = DaprClient::connect(format!("http://{}", r.sidecar.grpc_addrs[0]))
        .await
        .unwrap();
    let list = client
        .list_jobs_alpha1(rv1::ListJobsRequestAlpha1 {})
        .await
        .unwrap()
        .into_inner();
    let mut seen = format!("{:?}", list.jobs);
    for name in SEEDED {
        let path = format!("/jobsd/v1/jobs/{}", name.replace('|', "%7C"));
        let view = try_http(r.api, "GET", &path, &[], b"").await.unwrap();
        seen.push_str(&format!("\n{} {}", view.status, view.text()));
    }
    seen
}

// ---- HTTP ----

/// Job names and path segments that have broken routers and key spaces elsewhere.
fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("keep-a".to_owned()),
        Just("keep-b".to_owned()),
        Just("keep%7C%7Cc".to_owned()),
        "[a-z0-9-]{1,12}",
        Just("..".to_owned()),
        Just(".".to_owned()),
        Just("%2e%2e".to_owned()),
        Just("a%2Fb".to_owned()),
        Just("%2F".to_owned()),
        Just("keep-a%00".to_owned()),
        Just("%ff%fe".to_owned()),
        Just("%zz".to_owned()),
        Just("%".to_owned()),
        Just("a+b".to_owned()),
        Just("%20keep-a%20".to_owned()),
        Just("app%7C%7Cdefault%7C%7Cother%7C%7Cx".to_owned()),
        Just("%7C%7C".to_owned()),
        Just("%EF%BD%8Beep-a".to_owned()), // ｋeep-a, a full-width look-alike
        Just("keep-a%E2%80%8B".to_owned()), // a zero-width space after the name
        Just("%C0%AE%C0%AE".to_owned()),   // an overlong `..`
        "[a-z]{600,900}",
        "[%a-zA-Z0-9._~|:@!$&'()*+,;=-]{0,20}",
    ]
}

/// A path on one of the API's routes (or near one).
fn path() -> impl Strategy<Value = String> {
    let job_route = prop_oneof![
        Just("/v1.0-alpha1/jobs/"),
        Just("/v1.0/jobs/"),
        Just("/v1.0/schedule/jobs/"),
        Just("/jobsd/v1/jobs/"),
    ];
    let suffix = prop_oneof![
        4 => Just(""),
        1 => Just("/"),
        1 => Just("/pause"),
        1 => Just("/resume"),
        1 => Just("/trigger"),
        1 => Just("/backfill"),
        1 => Just("/runs"),
        1 => Just("/next"),
        1 => Just("/../keep-b"),
        1 => Just("/%2e%2e/x"),
    ];
    let other = prop_oneof![
        Just("/v1.0/jobs"),
        Just("/jobsd/v1/jobs"),
        Just("/jobsd/v1/jobs:pause"),
        Just("/jobsd/v1/jobs:resume"),
        Just("/jobsd/v1/preview"),
        Just("/jobsd/v1/export"),
        Just("/jobsd/v1/import"),
        Just("/jobsd/v1/clock"),
        Just("/jobsd/v1/clock/advance"),
        Just("/jobsd/v1/executions/x/complete"),
        Just("/jobsd/v1/executions/%ff/fail"),
        Just("/v1.0/metadata"),
        Just("/v1.0/healthz"),
        Just("/v1.0/actors/T/1/reminders/r"),
        Just("/v1.0/actors/T/1/timers/t"),
        Just("/v1.0/actors/T/1/method/m"),
        Just("//v1.0//jobs//keep-a"),
        Just("/v1.0/./jobs/keep-a"),
        Just("/v1.0/jobs/keep-a/../../jobsd/v1/jobs"),
    ];
    let query = prop_oneof![
        6 => Just(String::new()),
        1 => name().prop_map(|n| format!("?prefix={n}")),
        1 => Just("?limit=-1".to_owned()),
        1 => Just("?limit=99999999999999999999999".to_owned()),
        1 => Just("?state=paused&label=a%3Db&after=%ff".to_owned()),
        1 => "[a-z=&%0-9]{0,30}".prop_map(|q| format!("?{q}")),
    ];
    prop_oneof![
        3 => (job_route, name(), suffix, query.clone())
            .prop_map(|(route, name, suffix, query)| format!("{route}{name}{suffix}{query}")),
        1 => (other, query).prop_map(|(p, q)| format!("{p}{q}")),
    ]
}

fn method() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => Just("POST".to_owned()),
        3 => Just("GET".to_owned()),
        2 => Just("DELETE".to_owned()),
        1 => Just("PUT".to_owned()),
        1 => Just("PATCH".to_owned()),
        1 => Just("HEAD".to_owned()),
        1 => Just("OPTIONS".to_owned()),
        1 => "[A-Z]{1,8}",
    ]
}

/// Headers beside the body: conditions, trace context, content types, garbage values.
fn headers() -> impl Strategy<Value = Vec<(String, String)>> {
    let header = prop_oneof![
        "[ -~]{0,40}".prop_map(|v| ("Idempotency-Key".to_owned(), v)),
        prop_oneof![
            Just("*".to_owned()),
            Just("\"0\"".to_owned()),
            "[ -~]{0,20}"
        ]
        .prop_map(|v| ("If-Match".to_owned(), v)),
        "[0-9a-f-]{0,60}".prop_map(|v| ("traceparent".to_owned(), v)),
        prop_oneof![
            Just("application/json".to_owned()),
            Just("text/plain".to_owned()),
            "[ -~]{0,20}"
        ]
        .prop_map(|v| ("Content-Type".to_owned(), v)),
        "[ -~]{0,20}".prop_map(|v| ("dapr-api-token".to_owned(), v)),
        ("[a-zA-Z-]{1,20}", "[ -~]{0,60}"),
    ];
    proptest::collection::vec(header, 0..4)
}

/// A JSON value of any shape, some of them deep.
fn json_value() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just("null".to_owned()),
        Just("true".to_owned()),
        any::<i64>().prop_map(|n| n.to_string()),
        Just("1e400".to_owned()),
        Just("-0".to_owned()),
        Just("18446744073709551616".to_owned()),
        Just("0.000000000000000000000000001".to_owned()),
        "[ -~]{0,16}".prop_map(|s| serde_json::to_string(&s).unwrap()),
        Just("\"\\ud800\"".to_owned()),
    ];
    leaf.prop_recursive(6, 40, 5, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..5)
                .prop_map(|v| format!("[{}]", v.join(","))),
            proptest::collection::vec(("[a-zA-Z@]{1,10}", inner), 0..5).prop_map(|v| {
                let members: Vec<String> = v
                    .into_iter()
                    .map(|(k, v)| format!("{}:{v}", serde_json::to_string(&k).unwrap()))
                    .collect();
                format!("{{{}}}", members.join(","))
            }),
        ]
    })
}

/// A create body: valid, near-valid (cut short), with fields of the wrong type, deep,
/// oversized, not UTF-8, or bytes.
fn body() -> impl Strategy<Value = Vec<u8>> {
    let schedule = prop_oneof![
        Just("\"@every 1h\""),
        Just("\"*/5 * * * * *\""),
        Just("\"0 0 31 2 *\""),
        Just("\"@every -1s\""),
        Just("\"R5/PT1S\""),
        Just("\"\""),
        Just("\"61 * * * * *\""),
        Just("12"),
    ];
    let due = prop_oneof![
        Just("\"1h\""),
        Just("\"2099-01-01T00:00:00Z\""),
        Just("\"0s\""),
        Just("\"-5s\""),
        Just("\"9999999999h\""),
        Just("\"not a time\""),
    ];
    let field = prop_oneof![
        schedule.prop_map(|v| format!("\"schedule\":{v}")),
        due.prop_map(|v| format!("\"dueTime\":{v}")),
        prop_oneof![
            Just("3"),
            Just("-1"),
            Just("\"5\""),
            Just("4294967296"),
            Just("1.5")
        ]
        .prop_map(|v| format!("\"repeats\":{v}")),
        Just("\"ttl\":\"1s\"".to_owned()),
        json_value().prop_map(|v| format!("\"data\":{v}")),
        prop_oneof![
            Just(r#"{"drop":{}}"#),
            Just(r#"{"constant":{"interval":"1s","maxRetries":2}}"#),
            Just(r#"{"constant":{"interval":-1}}"#),
            Just(r#"{"exponential":{"initialInterval":"1s"}}"#),
            Just("[]"),
        ]
        .prop_map(|v| format!("\"failurePolicy\":{v}")),
        prop_oneof![Just("true"), Just("false"), Just("\"yes\"")]
            .prop_map(|v| format!("\"overwrite\":{v}")),
        Just("\"name\":\"other\"".to_owned()),
        prop_oneof![Just(r#"{"team":"a"}"#), Just(r#"{"":"x"}"#), Just("7")]
            .prop_map(|v| format!("\"labels\":{v}")),
        ("[a-zA-Z]{1,10}", json_value()).prop_map(|(k, v)| format!("\"{k}\":{v}")),
    ];
    let object = proptest::collection::vec(field, 0..6)
        .prop_map(|fields| format!("{{{}}}", fields.join(",")).into_bytes());
    prop_oneof![
        2 => Just(Vec::new()),
        6 => object.clone(),
        2 => (object.clone(), any::<prop::sample::Index>()).prop_map(|(b, cut)| {
            let at = cut.index(b.len().max(1));
            b[..at].to_vec()
        }),
        1 => (object, any::<prop::sample::Index>(), prop_oneof![Just(0xffu8), Just(0xc0), Just(0x80)])
            .prop_map(|(mut b, at, byte)| {
                let at = at.index(b.len().max(1));
                b.insert(at, byte);
                b
            }),
        1 => (1usize..400).prop_map(|depth| {
            format!("{{\"schedule\":\"@every 1h\",\"data\":{}1{}}}", "[".repeat(depth), "]".repeat(depth))
                .into_bytes()
        }),
        1 => json_value().prop_map(String::into_bytes),
        1 => Just(vec![b' '; 70 << 10]),
        1 => proptest::collection::vec(any::<u8>(), 0..200),
    ]
}

#[derive(Debug, Clone)]
struct HttpCase {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

fn http_case() -> impl Strategy<Value = HttpCase> {
    (method(), path(), headers(), body()).prop_map(|(method, path, headers, body)| HttpCase {
        method,
        path,
        headers,
        body,
    })
}

/// The 5xx answers daprd itself gives on its jobs and actors routes (a scheduler error is
/// `500` there, whatever the input was); anything else (`ERR_INTERNAL`, a bare 500, a 502,
/// 503 or 504), on any route, is a bug.
const DAPR_5XX: [&str; 10] = [
    "DAPR_SCHEDULER_SCHEDULE_JOB",
    "DAPR_SCHEDULER_GET_JOB",
    "DAPR_SCHEDULER_DELETE_JOB",
    "DAPR_SCHEDULER_LIST_JOBS",
    "ERR_ACTOR_RUNTIME_NOT_FOUND",
    "ERR_ACTOR_REMINDER_CREATE",
    "ERR_ACTOR_REMINDER_GET",
    "ERR_ACTOR_REMINDER_DELETE",
    "ERR_ACTOR_TIMER_CREATE",
    "ERR_ACTOR_INVOKE_METHOD",
];

fn error_code(body: &[u8]) -> Option<String> {
    let json: serde_json::Value = serde_json::from_slice(body).ok()?;
    json.get("errorCode")?.as_str().map(str::to_owned)
}

async fn check_http(r: &Running, case: &HttpCase) -> Result<(), TestCaseError> {
    let before = snapshot(r).await;
    let panics = PANICS.load(Ordering::SeqCst);
    let headers: Vec<(&str, &str)> = case
        .headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let answer = tokio::time::timeout(
        Duration::from_secs(30),
        try_http(r.api, &case.method, &case.path, &headers, &case.body),
    )
    .await
    .map_err(|_| TestCaseError::fail("no answer within 30 s"))?;
    prop_assert_eq!(PANICS.load(Ordering::SeqCst), panics, "the server panicked");
    let Some(resp) = answer else {
        return Err(TestCaseError::fail(
            "the connection closed without an answer",
        ));
    };
    if resp.status >= 500 {
        // A HEAD answer has no body: the GET twin says which error it was.
        let body = match case.method.as_str() {
            "HEAD" => try_http(r.api, "GET", &case.path, &headers, &case.body)
                .await
                .map(|get| get.body)
                .unwrap_or_default(),
            _ => resp.body.clone(),
        };
        let code = error_code(&body);
        // jobsd's create answers as Dapr's does (its checks are Dapr's), so these codes may
        // come from `/jobsd/v1/jobs/{name}` too.
        let daprs = code.as_deref().is_some_and(|c| DAPR_5XX.contains(&c));
        prop_assert!(
            daprs,
            "{} answered {}: {}",
            case.path,
            resp.status,
            resp.text()
        );
    }
    if (400..500).contains(&resp.status) {
        prop_assert_eq!(
            snapshot(r).await,
            before,
            "a refused request changed the jobs"
        );
    }
    Ok(())
}

#[test]
fn http_requests_end_in_answers_without_panics_or_changes_when_refused() {
    count_panics();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let r = rt.block_on(sidecar());
    let mut runner = runner("hostile HTTP requests", 2_000);
    let result = runner.run(&http_case(), |case| rt.block_on(check_http(&r, &case)));
    rt.block_on(r.stop());
    if let Err(e) = result {
        panic!("{e}");
    }
}

// ---- gRPC ----

/// Bytes in, bytes out: lets a test send what no generated client would.
#[derive(Debug, Clone, Copy, Default)]
struct Raw;

impl Codec for Raw {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = Raw;
    type Decoder = Raw;
    fn encoder(&mut self) -> Raw {
        Raw
    }
    fn decoder(&mut self) -> Raw {
        Raw
    }
}

impl Encoder for Raw {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn encode(&mut self, item: Vec<u8>, dst: &mut EncodeBuf<'_>) -> Result<(), tonic::Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl Decoder for Raw {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Vec<u8>>, tonic::Status> {
        let mut out = vec![0; src.remaining()];
        src.copy_to_slice(&mut out);
        Ok(Some(out))
    }
}

/// The unary methods of the API port's services.
const UNARY: [&str; 22] = [
    "/dapr.proto.runtime.v1.Dapr/ScheduleJobAlpha1",
    "/dapr.proto.runtime.v1.Dapr/GetJobAlpha1",
    "/dapr.proto.runtime.v1.Dapr/DeleteJobAlpha1",
    "/dapr.proto.runtime.v1.Dapr/ListJobsAlpha1",
    "/dapr.proto.runtime.v1.Dapr/DeleteJobsByPrefixAlpha1",
    "/dapr.proto.runtime.v1.Dapr/ScheduleJob",
    "/dapr.proto.runtime.v1.Dapr/GetJob",
    "/dapr.proto.runtime.v1.Dapr/DeleteJob",
    "/dapr.proto.runtime.v1.Dapr/ListJobs",
    "/dapr.proto.runtime.v1.Dapr/DeleteJobsByPrefix",
    "/jobsd.v1.Jobs/ScheduleJob",
    "/jobsd.v1.Jobs/GetJob",
    "/jobsd.v1.Jobs/DeleteJob",
    "/jobsd.v1.Jobs/ListJobs",
    "/jobsd.v1.Jobs/ListRuns",
    "/jobsd.v1.Jobs/PauseJob",
    "/jobsd.v1.Jobs/ResumeJob",
    "/jobsd.v1.Jobs/TriggerJob",
    "/jobsd.v1.Jobs/BackfillJob",
    "/jobsd.v1.Jobs/Preview",
    "/jobsd.v1.Jobs/PauseJobs",
    "/jobsd.v1.Jobs/CompleteExecution",
];

/// One protobuf field: a number and either a varint or length-delimited bytes.
#[derive(Debug, Clone)]
enum Field {
    Varint(u32, u64),
    Bytes(u32, Vec<u8>),
}

/// A message shaped like the API's (fields 1–8, names in the string fields, nested
/// messages), or plain bytes.
fn message() -> impl Strategy<Value = Vec<u8>> {
    let text = prop_oneof![
        name().prop_map(String::into_bytes),
        Just(b"keep-a".to_vec()),
        Just(b"@every 1s".to_vec()),
        Just(b"1h".to_vec()),
        Just(vec![0xff, 0xfe]),
        Just("a".repeat(100_000).into_bytes()),
        proptest::collection::vec(any::<u8>(), 0..40),
    ];
    let field = prop_oneof![
        (1u32..9, any::<u64>()).prop_map(|(n, v)| Field::Varint(n, v)),
        (1u32..9, text.clone()).prop_map(|(n, b)| Field::Bytes(n, b)),
        (1u32..9, proptest::collection::vec((1u32..9, text), 0..4)).prop_map(|(n, inner)| {
            let inner = inner.into_iter().map(|(k, b)| Field::Bytes(k, b)).collect();
            Field::Bytes(n, encode(&inner))
        }),
    ];
    prop_oneof![
        4 => proptest::collection::vec(field, 0..6).prop_map(|fields| encode(&fields)),
        1 => proptest::collection::vec(any::<u8>(), 0..64),
    ]
}

fn encode(fields: &Vec<Field>) -> Vec<u8> {
    use prost::encoding::{WireType, encode_key, encode_varint};
    let mut out = Vec::new();
    for field in fields {
        match field {
            Field::Varint(n, v) => {
                encode_key(*n, WireType::Varint, &mut out);
                encode_varint(*v, &mut out);
            }
            Field::Bytes(n, b) => {
                encode_key(*n, WireType::LengthDelimited, &mut out);
                encode_varint(b.len() as u64, &mut out);
                out.extend_from_slice(b);
            }
        }
    }
    out
}

/// A typed Dapr `ScheduleJobRequest` with generated fields, as an SDK would send it.
fn schedule_request() -> impl Strategy<Value = Vec<u8>> {
    let opt = |s: &'static [&'static str]| {
        proptest::option::of(proptest::sample::select(s).prop_map(str::to_owned))
    };
    (
        name(),
        opt(&["@every 1h", "*/3 * * * * *", "bogus", "", "@every -1s"]),
        opt(&["1h", "0s", "-1s", "2099-01-01T00:00:00Z", "nonsense"]),
        proptest::option::of(any::<u32>()),
        opt(&["1s", "-1h", "x"]),
        proptest::option::of((
            "[a-z./]{0,30}",
            proptest::collection::vec(any::<u8>(), 0..30),
        )),
        any::<bool>(),
    )
        .prop_map(
            |(name, schedule, due_time, repeats, ttl, data, overwrite)| {
                use prost::Message;
                rv1::ScheduleJobRequest {
                    job: Some(rv1::Job {
                        name,
                        schedule,
                        due_time,
                        repeats,
                        ttl,
                        data: data.map(|(type_url, value)| prost_types::Any { type_url, value }),
                        failure_policy: None,
                    }),
                    overwrite,
                }
                .encode_to_vec()
            },
        )
}

#[derive(Debug, Clone)]
struct GrpcCase {
    method: &'static str,
    message: Vec<u8>,
}

fn grpc_case() -> impl Strategy<Value = GrpcCase> {
    prop_oneof![
        (proptest::sample::select(&UNARY[..]), message())
            .prop_map(|(method, message)| GrpcCase { method, message }),
        (
            prop_oneof![
                Just("/dapr.proto.runtime.v1.Dapr/ScheduleJobAlpha1"),
                Just("/dapr.proto.runtime.v1.Dapr/ScheduleJob"),
            ],
            schedule_request()
        )
            .prop_map(|(method, message)| GrpcCase { method, message }),
    ]
}

async fn check_grpc(
    r: &Running,
    channel: &tonic::transport::Channel,
    case: &GrpcCase,
) -> Result<(), TestCaseError> {
    let before = snapshot(r).await;
    let panics = PANICS.load(Ordering::SeqCst);
    let mut grpc = tonic::client::Grpc::new(channel.clone());
    grpc.ready()
        .await
        .map_err(|e| TestCaseError::fail(format!("channel: {e}")))?;
    let answer = tokio::time::timeout(
        Duration::from_secs(30),
        grpc.unary(
            tonic::Request::new(case.message.clone()),
            case.method.parse().unwrap(),
            Raw,
        ),
    )
    .await
    .map_err(|_| TestCaseError::fail("no answer within 30 s"))?;
    prop_assert_eq!(PANICS.load(Ordering::SeqCst), panics, "the server panicked");
    let code = match answer {
        Ok(_) => tonic::Code::Ok,
        Err(status) => {
            // Unknown is what a panicking or broken handler ends in; Unavailable a dropped
            // connection.
            prop_assert!(
                !matches!(
                    status.code(),
                    tonic::Code::Unknown | tonic::Code::Unavailable | tonic::Code::DataLoss
                ),
                "{} answered {:?}: {}",
                case.method,
                status.code(),
                status.message()
            );
            status.code()
        }
    };
    if matches!(
        code,
        tonic::Code::InvalidArgument
            | tonic::Code::NotFound
            | tonic::Code::AlreadyExists
            | tonic::Code::FailedPrecondition
            | tonic::Code::OutOfRange
            | tonic::Code::ResourceExhausted
            | tonic::Code::Unauthenticated
    ) {
        prop_assert_eq!(snapshot(r).await, before, "a refused call changed the jobs");
    }
    Ok(())
}

#[test]
fn grpc_messages_end_in_answers_without_panics_or_changes_when_refused() {
    count_panics();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let r = rt.block_on(sidecar());
    let channel = rt.block_on(async {
        tonic::transport::Endpoint::from_shared(format!("http://{}", r.sidecar.grpc_addrs[0]))
            .unwrap()
            .connect()
            .await
            .unwrap()
    });
    let mut runner = runner("hostile gRPC messages", 1_500);
    let result = runner.run(&grpc_case(), |case| {
        rt.block_on(check_grpc(&r, &channel, &case))
    });
    rt.block_on(r.stop());
    if let Err(e) = result {
        panic!("{e}");
    }
}

// ---- deadlines (on tokio's paused clock: the wait is skipped, the order of events kept) ----

/// Reads until the server closes or answers; what came back.
async fn read_answer(stream: &mut tokio::net::TcpStream) -> Vec<u8> {
    use tokio::io::AsyncReadExt;
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer).await;
    answer
}

#[tokio::test(start_paused = true)]
async fn headers_trickled_or_never_sent_past_the_deadline_lose_the_connection() {
    use tokio::io::AsyncWriteExt;
    let addr = common::serve_http(common::state(common::engine(), "myapp", "default")).await;
    let mut slow = tokio::net::TcpStream::connect(addr).await.unwrap();
    let started = tokio::time::Instant::now();
    slow.write_all(b"GET /v1.0/jobs HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    // One header byte a second: never done within the deadline.
    let trickle = async {
        for _ in 0..60 {
            tokio::time::sleep(Duration::from_secs(1)).await;
            if slow.write_all(b"a").await.is_err() {
                break;
            }
        }
    };
    trickle.await;
    let answer = read_answer(&mut slow).await;
    let waited = started.elapsed();
    assert!(
        answer.is_empty() || answer.starts_with(b"HTTP/1.1 408"),
        "{:?}",
        String::from_utf8_lossy(&answer)
    );
    assert!(
        waited < jobsd::serve::HEADER_READ_TIMEOUT + Duration::from_secs(2),
        "cut off after {waited:?}"
    );
    // A connection that never sends a byte is closed at the same deadline.
    let mut idle = tokio::net::TcpStream::connect(addr).await.unwrap();
    let opened = tokio::time::Instant::now();
    assert!(read_answer(&mut idle).await.is_empty());
    assert!(opened.elapsed() <= jobsd::serve::HEADER_READ_TIMEOUT + Duration::from_secs(1));
    // And on the gRPC port, where nothing else would ever close it (the server's own HTTP/2
    // preface may come first).
    let grpc = common::serve_grpc(common::state(common::engine(), "myapp", "default")).await;
    let mut idle = tokio::net::TcpStream::connect(grpc).await.unwrap();
    let opened = tokio::time::Instant::now();
    read_answer(&mut idle).await;
    assert!(opened.elapsed() <= jobsd::serve::HEADER_READ_TIMEOUT + Duration::from_secs(1));
}

#[tokio::test(start_paused = true)]
async fn a_body_trickled_past_the_deadline_is_a_400() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = common::serve_http(common::state(common::engine(), "myapp", "default")).await;
    let mut slow = tokio::net::TcpStream::connect(addr).await.unwrap();
    slow.write_all(
        b"POST /v1.0-alpha1/jobs/slow HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{",
    )
    .await
    .unwrap();
    let started = tokio::time::Instant::now();
    let (mut read, mut write) = slow.split();
    // A byte every 2 s: the connection is never idle, the body never complete.
    let trickle = async {
        loop {
            tokio::time::sleep(Duration::from_secs(2)).await;
            if write.write_all(b" ").await.is_err() {
                break;
            }
        }
    };
    let mut buf = vec![0; 4096];
    let answer = tokio::select! {
        n = read.read(&mut buf) => buf[..n.unwrap_or(0)].to_vec(),
        () = trickle => Vec::new(),
    };
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 400"), "{text}");
    assert!(text.contains("ERR_BODY_READ"), "{text}");
    let waited = started.elapsed();
    assert!(
        waited >= jobsd::api::http_parts::BODY_READ_TIMEOUT
            && waited < jobsd::api::http_parts::BODY_READ_TIMEOUT + Duration::from_secs(3),
        "answered after {waited:?}"
    );
}
