//! daprd's HTTP Jobs API, end to end: real axum server on 127.0.0.1:0, real engine over a
//! memory store. Each test checks what an app (or an SDK) would notice: statuses, bodies,
//! error codes and messages.

mod common;

use std::net::SocketAddr;

use common::{HttpResponse, engine, http, serve_http, state};
use jobsd::api::ApiState;
use jobsd::proto::runtime as rv1;
use serde_json::json;

const PREFIXES: [&str; 3] = ["/v1.0-alpha1/jobs", "/v1.0/jobs", "/v1.0/schedule/jobs"];

async fn server() -> (SocketAddr, ApiState) {
    let st = state(engine(), "myapp", "default");
    (serve_http(st.clone()).await, st)
}

async fn post(addr: SocketAddr, path: &str, body: &str) -> HttpResponse {
    http(
        addr,
        "POST",
        path,
        &[("Content-Type", "application/json")],
        body.as_bytes(),
    )
    .await
}

/// POSTs `body` to `path` and asserts 204 No Content.
async fn post_ok(addr: SocketAddr, path: &str, body: &str) {
    let resp = post(addr, path, body).await;
    assert_eq!(resp.status, 204, "POST {path}: {}", resp.text());
}

async fn get(addr: SocketAddr, path: &str) -> HttpResponse {
    http(addr, "GET", path, &[], b"").await
}

async fn delete(addr: SocketAddr, path: &str) -> HttpResponse {
    http(addr, "DELETE", path, &[], b"").await
}

/// Asserts a dapr/kit error: status, reason, message, one ErrorInfo.
fn assert_kit_error(resp: &HttpResponse, status: u16, reason: &str) -> serde_json::Value {
    assert_eq!(resp.status, status, "body: {}", resp.text());
    assert_eq!(resp.header("content-type"), Some("application/json"));
    let body = resp.json();
    assert_eq!(body["errorCode"], reason, "{body}");
    let details = body["details"].as_array().expect("details");
    assert_eq!(details.len(), 1, "{body}");
    assert_eq!(
        details[0]["@type"],
        "type.googleapis.com/google.rpc.ErrorInfo"
    );
    assert_eq!(details[0]["domain"], "dapr.io");
    assert_eq!(details[0]["reason"], reason);
    body
}

/// Asserts a legacy error: status, code, message prefix, no details.
fn assert_legacy_error(resp: &HttpResponse, status: u16, code: &str, prefix: &str) {
    assert_eq!(resp.status, status, "body: {}", resp.text());
    let body = resp.json();
    assert_eq!(body["errorCode"], code, "{body}");
    let message = body["message"].as_str().unwrap_or_default();
    assert!(message.starts_with(prefix), "{message}");
    assert!(body.get("details").is_none(), "{body}");
}

#[tokio::test]
async fn schedule_get_delete_round_trip_on_every_prefix() {
    let (addr, _) = server().await;
    for prefix in PREFIXES {
        let path = format!("{prefix}/roundtrip");
        let resp = post(
            addr,
            &path,
            r#"{"schedule":"@every 1m","repeats":123,"dueTime":"1000s","ttl":"9999s","data":"hello world"}"#,
        )
        .await;
        assert_eq!(resp.status, 204, "{prefix}: {}", resp.text());
        assert!(resp.body.is_empty());
        assert_eq!(resp.header("content-type"), None);

        let resp = get(addr, &path).await;
        assert_eq!(resp.status, 200, "{prefix}: {}", resp.text());
        assert_eq!(resp.header("content-type"), Some("application/json"));
        assert_eq!(
            resp.json(),
            json!({
                "name": "roundtrip",
                "schedule": "@every 1m",
                "repeats": 123,
                "dueTime": "1000s",
                "ttl": "9999s",
                "data": {"@type": "type.googleapis.com/google.protobuf.Value", "value": "hello world"},
                "failurePolicy": {"constant": {"interval": "1s", "maxRetries": 3}},
            })
        );

        let resp = delete(addr, &path).await;
        assert_eq!(resp.status, 204, "{}", resp.text());
        assert!(resp.body.is_empty());
        let resp = get(addr, &path).await;
        assert_eq!(resp.status, 500);
    }
}

#[tokio::test]
async fn data_is_stored_as_a_value_and_absent_data_as_none() {
    let (addr, _) = server().await;
    post_ok(
        addr,
        "/v1.0/jobs/obj",
        r#"{"dueTime":"0s","data":{"expression":"val","n":[1,2.5,true,null]}}"#,
    )
    .await;
    let body = get(addr, "/v1.0/jobs/obj").await.json();
    assert_eq!(
        body["data"],
        json!({"@type": "type.googleapis.com/google.protobuf.Value",
               "value": {"expression": "val", "n": [1, 2.5, true, null]}})
    );

    // An Any-looking object is not unpacked; it stays a Struct.
    post_ok(addr, "/v1.0/jobs/anylike", r#"{"dueTime":"0s","data":{"@type":"type.googleapis.com/google.protobuf.StringValue","value":"x"}}"#).await;
    let body = get(addr, "/v1.0/jobs/anylike").await.json();
    assert_eq!(
        body["data"]["value"],
        json!({"@type": "type.googleapis.com/google.protobuf.StringValue", "value": "x"})
    );

    post_ok(addr, "/v1.0/jobs/nodata", r#"{"schedule":"@daily"}"#).await;
    let body = get(addr, "/v1.0/jobs/nodata").await.json();
    assert!(body.get("data").is_none(), "{body}");

    post_ok(
        addr,
        "/v1.0/jobs/nulldata",
        r#"{"schedule":"@daily","data":null}"#,
    )
    .await;
    let body = get(addr, "/v1.0/jobs/nulldata").await.json();
    assert_eq!(body["data"]["value"], serde_json::Value::Null);
    assert!(body["data"].get("value").is_some(), "{body}");
}

#[tokio::test]
async fn proto_field_names_and_failure_policies() {
    let (addr, _) = server().await;
    post_ok(addr, "/v1.0/jobs/snake", r#"{"schedule":"@daily","due_time":"10s","failure_policy":{"constant":{"interval":"1.5s","max_retries":5}},"unknown":{"x":1}}"#).await;
    let body = get(addr, "/v1.0/jobs/snake").await.json();
    assert_eq!(body["dueTime"], "10s");
    assert_eq!(
        body["failurePolicy"],
        json!({"constant": {"interval": "1.500s", "maxRetries": 5}})
    );

    post_ok(
        addr,
        "/v1.0/jobs/drop",
        r#"{"schedule":"@daily","failurePolicy":{"drop":{}}}"#,
    )
    .await;
    let body = get(addr, "/v1.0/jobs/drop").await.json();
    assert_eq!(body["failurePolicy"], json!({"drop": {}}));

    post_ok(
        addr,
        "/v1.0/jobs/forever",
        r#"{"schedule":"@daily","failurePolicy":{"constant":{"interval":"0s"}}}"#,
    )
    .await;
    let body = get(addr, "/v1.0/jobs/forever").await.json();
    assert_eq!(
        body["failurePolicy"],
        json!({"constant": {"interval": "0s"}})
    );
}

#[tokio::test]
async fn malformed_bodies_are_400_without_details() {
    let (addr, _) = server().await;
    for body in [
        "[{}]",
        r#"{"schedule":"@daily","repeats":-1}"#,
        r#"{"schedule":"@daily","repeats":1.5}"#,
        r#"{"dueTime":5}"#,
        r#"{"schedule":"@daily","failurePolicy":{"constant":{"interval":"1m"}}}"#,
        r#"{"schedule":"@daily","overwrite":"yes"}"#,
        r#"{"schedule":"@daily""#,
        "not json",
    ] {
        let resp = post(addr, "/v1.0/jobs/bad", body).await;
        assert_legacy_error(
            &resp,
            400,
            "ERR_MALFORMED_REQUEST",
            "failed deserializing HTTP body: proto: ",
        );
    }
    let resp = post(addr, "/v1.0/jobs/bad", "[{}]").await;
    assert_eq!(
        resp.json()["message"],
        "failed deserializing HTTP body: proto: syntax error (line 1:1): unexpected token ["
    );
    let resp = post(
        addr,
        "/v1.0/jobs/bad",
        r#"{"schedule":"@daily","repeats":-1}"#,
    )
    .await;
    assert_eq!(
        resp.json()["message"],
        "failed deserializing HTTP body: proto: (line 1:32): invalid value for uint32 field repeats: -1"
    );
    // Nothing was stored.
    assert_eq!(get(addr, "/v1.0/jobs/bad").await.status, 500);
}

#[tokio::test]
async fn repeats_as_numeric_string_is_accepted() {
    let (addr, _) = server().await;
    post_ok(
        addr,
        "/v1.0/jobs/strrep",
        r#"{"schedule":"@daily","repeats":"7"}"#,
    )
    .await;
    assert_eq!(get(addr, "/v1.0/jobs/strrep").await.json()["repeats"], 7);
}

#[tokio::test]
async fn name_checks_follow_daprd_order() {
    let (addr, _) = server().await;
    // A name in the body wins over everything after parsing; metadata has the app ID only.
    let resp = post(addr, "/v1.0/jobs/x", r#"{"name":"x","schedule":"@daily"}"#).await;
    let body = assert_kit_error(&resp, 400, "DAPR_SCHEDULER_JOB_NAME");
    assert_eq!(body["message"], "Set the job name in the url only");
    assert_eq!(body["details"][0]["metadata"], json!({"appID": "myapp"}));
    // An empty name in the body is no name.
    post_ok(
        addr,
        "/v1.0/jobs/emptybodyname",
        r#"{"name":"","schedule":"@daily"}"#,
    )
    .await;

    // Whitespace-only names (`%20`, `+`) are trimmed to nothing.
    for path in ["/v1.0/jobs/%20", "/v1.0/jobs/+", "/v1.0-alpha1/jobs/%09%20"] {
        let resp = post(addr, path, r#"{"schedule":"@daily"}"#).await;
        let body = assert_kit_error(&resp, 400, "DAPR_SCHEDULER_JOB_NAME_EMPTY");
        assert_eq!(body["message"], "Name is empty");
        assert_eq!(
            body["details"][0]["metadata"],
            json!({"appID": "myapp", "namespace": "default"})
        );
    }

    // Neither schedule nor dueTime (by presence): Schedule is empty; an empty body too.
    for body in [
        "{}",
        "",
        r#"{"repeats":3,"ttl":"1h"}"#,
        r#"{"schedule":null}"#,
    ] {
        let resp = post(addr, "/v1.0/jobs/nosched", body).await;
        let json = assert_kit_error(&resp, 400, "DAPR_SCHEDULER_SCHEDULE_EMPTY");
        assert_eq!(json["message"], "Schedule is empty");
    }
    // A present but empty schedule passes daprd and fails in the Scheduler.
    let resp = post(addr, "/v1.0/jobs/emptyspec", r#"{"schedule":""}"#).await;
    let json = assert_kit_error(&resp, 500, "DAPR_SCHEDULER_SCHEDULE_JOB");
    assert!(
        json["message"]
            .as_str()
            .unwrap_or_default()
            .contains("job failed validation: empty spec string"),
        "{json}"
    );
    // The name is trimmed before use.
    post_ok(addr, "/v1.0/jobs/%20trimmed%20", r#"{"schedule":"@daily"}"#).await;
    assert_eq!(get(addr, "/v1.0/jobs/trimmed").await.status, 200);
}

#[tokio::test]
async fn bad_url_escapes_get_gos_bare_400() {
    // Go's HTTP server refuses the request target before daprd's router sees it (daprd
    // 1.18.2, e2e/dapr/differential.sh B8): no traceparent, no nosniff, the connection closes.
    let (addr, _) = server().await;
    for (method, path) in [
        ("POST", "/v1.0/jobs/bad%zzname"),
        ("GET", "/v1.0/jobs/bad%zzname"),
        ("DELETE", "/v1.0-alpha1/jobs/bad%"),
        ("PUT", "/v1.0/actors/T/1/reminders/r%4"),
        ("GET", "/v1.0/actors/T/a%zz/reminders/r"),
    ] {
        let resp = http(addr, method, path, &[], b"").await;
        assert_eq!(resp.status, 400, "{method} {path}");
        assert_eq!(
            resp.header("content-type"),
            Some("text/plain; charset=utf-8")
        );
        assert_eq!(resp.header("connection"), Some("close"));
        assert_eq!(resp.header("traceparent"), None);
        assert_eq!(resp.header("x-content-type-options"), None);
        assert_eq!(resp.text(), "400 Bad Request");
    }
}

#[tokio::test]
async fn head_and_dot_segments_route_as_daprd() {
    // daprd has no HEAD routes, and chi cleans `.`/`..` segments before routing (daprd
    // 1.18.2, e2e/dapr/differential.sh B18, B25).
    let (addr, _) = server().await;
    post_ok(addr, "/v1.0/jobs/h", r#"{"schedule":"@daily"}"#).await;
    let direct = serde_json::json!({
        "errorCode": "ERR_DIRECT_INVOKE",
        "message": "failed getting app id either from the URL path or the header dapr-app-id"
    });
    for path in ["/v1.0/jobs/h", "/v1.0/healthz", "/v1.0/metadata"] {
        let head = http(addr, "HEAD", path, &[], b"").await;
        assert_eq!(head.status, 404, "HEAD {path}");
        assert_eq!(head.header("content-type"), Some("application/json"));
    }
    for method in ["GET", "POST", "DELETE"] {
        for path in ["/v1.0/jobs/..", "/v1.0/jobs/h/../.."] {
            let resp = http(addr, method, path, &[], b"").await;
            assert_eq!(resp.status, 404, "{method} {path}");
            assert_eq!(resp.json(), direct);
        }
    }
    // A method the health routes do not serve: daprd's 404, with no `Allow`.
    let put = http(addr, "PUT", "/v1.0/healthz", &[], b"").await;
    assert_eq!(put.status, 404);
    assert_eq!(put.header("allow"), None);
    assert_eq!(get(addr, "/v1.0/jobs/h").await.status, 200);
}

#[tokio::test]
async fn overwrite_conflicts_and_replaces() {
    let (addr, _) = server().await;
    post_ok(
        addr,
        "/v1.0/jobs/ow",
        r#"{"schedule":"@daily","repeats":1}"#,
    )
    .await;

    let resp = post(
        addr,
        "/v1.0/jobs/ow",
        r#"{"schedule":"@hourly","repeats":2}"#,
    )
    .await;
    let body = assert_kit_error(&resp, 409, "DAPR_SCHEDULER_SCHEDULE_JOB");
    assert_eq!(
        body["message"],
        "failed to schedule job due to: rpc error: code = AlreadyExists desc = job already exists: 'app||default||myapp||ow'"
    );
    assert_eq!(
        body["details"][0]["metadata"],
        json!({"appID": "myapp", "namespace": "default"})
    );
    let job = get(addr, "/v1.0/jobs/ow").await.json();
    assert_eq!(job["schedule"], "@daily");
    assert_eq!(job["repeats"], 1);

    post_ok(
        addr,
        "/v1.0/jobs/ow",
        r#"{"schedule":"@hourly","repeats":2,"overwrite":true}"#,
    )
    .await;
    let job = get(addr, "/v1.0/jobs/ow").await.json();
    assert_eq!(job["schedule"], "@hourly");
    assert_eq!(job["repeats"], 2);
}

#[tokio::test]
async fn missing_jobs_get_500_and_delete_204() {
    let (addr, _) = server().await;
    let resp = get(addr, "/v1.0/jobs/nope").await;
    let body = assert_kit_error(&resp, 500, "DAPR_SCHEDULER_GET_JOB");
    let message = body["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with(
            "failed to get job due to: rpc error: code = NotFound desc = job not found: "
        ),
        "{message}"
    );
    let resp = delete(addr, "/v1.0/jobs/nope").await;
    assert_eq!(resp.status, 204, "{}", resp.text());
}

#[tokio::test]
async fn special_names_round_trip() {
    let (addr, _) = server().await;
    for (path, name) in [
        ("/v1.0/jobs/my%7C%7Cjob@name", "my||job@name"),
        ("/v1.0/jobs/my||job@name", "my||job@name"),
        ("/v1.0/jobs/caf%C3%A9", "café"),
        ("/v1.0/jobs/a+b", "a b"),
    ] {
        let resp = post(addr, path, r#"{"schedule":"@daily"}"#).await;
        assert_eq!(resp.status, 204, "{path}: {}", resp.text());
        let resp = get(addr, path).await;
        assert_eq!(resp.status, 200, "{path}");
        assert_eq!(resp.json()["name"], name);
        assert_eq!(delete(addr, path).await.status, 204);
    }
}

#[tokio::test]
async fn invalid_names_are_rejected_by_the_validator() {
    let (addr, _) = server().await;
    let long = "a".repeat(600);
    let cases = [
        ("bad%2Fname", "', '#' or '?'"),
        ("bad%23name", "', '#' or '?'"),
        ("bad%3Fname", "', '#' or '?'"),
        ("bad%5Cname", "', '#' or '?'"),
        ("bad%00name", "must not contain control characters"),
        ("bad%0Aname", "must not contain control characters"),
        (long.as_str(), "must be at most 512 characters"),
    ];
    for (segment, why) in cases {
        let resp = post(
            addr,
            &format!("/v1.0/jobs/{segment}"),
            r#"{"schedule":"@daily"}"#,
        )
        .await;
        let body = assert_kit_error(&resp, 500, "DAPR_SCHEDULER_SCHEDULE_JOB");
        let message = body["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with(
                "failed to schedule job due to: rpc error: code = Unknown desc = job name is invalid \"app||default||myapp||"
            ),
            "{segment}: {message}"
        );
        assert!(message.ends_with(why), "{segment}: {message}");
    }
    // A name that is not UTF-8 fails where grpc-go would marshal it.
    let resp = post(addr, "/v1.0/jobs/bad%FFname", r#"{"schedule":"@daily"}"#).await;
    let body = assert_kit_error(&resp, 500, "DAPR_SCHEDULER_SCHEDULE_JOB");
    assert!(
        body["message"]
            .as_str()
            .unwrap_or_default()
            .contains("string field contains invalid UTF-8"),
        "{body}"
    );
}

#[tokio::test]
async fn validation_errors_are_internal_500() {
    let (addr, _) = server().await;
    let cases = [
        (
            r#"{"schedule":"* * *"}"#,
            "job failed validation: expected exactly 6 fields",
        ),
        (
            r#"{"dueTime":"nope"}"#,
            "job failed validation: due time format not recognized",
        ),
        (
            r#"{"dueTime":"1s","ttl":"1h"}"#,
            "job failed validation: job must have a schedule to have a ttl",
        ),
        (
            r#"{"schedule":"@daily","repeats":0}"#,
            "job failed validation: defined repeats must be greater than 0",
        ),
    ];
    for (body, want) in cases {
        let resp = post(addr, "/v1.0/jobs/invalid", body).await;
        let json = assert_kit_error(&resp, 500, "DAPR_SCHEDULER_SCHEDULE_JOB");
        let message = json["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with("failed to schedule job due to: rpc error: code = Unknown desc = "),
            "{message}"
        );
        assert!(message.contains(want), "{body}: {message}");
    }
}

#[tokio::test]
async fn api_token_is_enforced_except_on_healthz() {
    let mut st = state(engine(), "myapp", "default");
    st.api_token = Some("s3cret".to_owned());
    let addr = serve_http(st).await;
    let token = [("dapr-api-token", "s3cret")];

    let resp = post(addr, "/v1.0/jobs/tok", r#"{"schedule":"@daily"}"#).await;
    assert_eq!(resp.status, 401);
    assert_eq!(resp.text(), "invalid api token\n");
    let resp = http(
        addr,
        "POST",
        "/v1.0/jobs/tok",
        &[("dapr-api-token", "wrong")],
        br#"{"schedule":"@daily"}"#,
    )
    .await;
    assert_eq!(resp.status, 401);
    for (method, path) in [
        ("GET", "/v1.0/jobs/tok"),
        ("GET", "/v1.0/metadata"),
        ("GET", "/nowhere"),
    ] {
        assert_eq!(
            http(addr, method, path, &[], b"").await.status,
            401,
            "{path}"
        );
    }

    let resp = http(
        addr,
        "POST",
        "/v1.0/jobs/tok",
        &token,
        br#"{"schedule":"@daily"}"#,
    )
    .await;
    assert_eq!(resp.status, 204, "{}", resp.text());
    assert_eq!(
        http(addr, "GET", "/v1.0/jobs/tok", &token, b"")
            .await
            .status,
        200
    );
    assert_eq!(
        http(addr, "DELETE", "/v1.0/jobs/tok", &token, b"")
            .await
            .status,
        204
    );

    assert_eq!(get(addr, "/v1.0/healthz").await.status, 204);
    assert_eq!(get(addr, "/v1.0/healthz/outbound").await.status, 204);
}

#[tokio::test]
async fn bodies_over_the_limit_are_daprds_stream_too_large() {
    // daprd 1.18.2 (e2e/dapr/differential.sh B32): 400 `stream too large`; a body one byte
    // over is cut at the limit and read as if whole.
    let mut st = state(engine(), "myapp", "default");
    st.max_body_size = 1000;
    let addr = serve_http(st).await;
    let big = format!(r#"{{"schedule":"@daily","data":"{}"}}"#, "x".repeat(2000));
    let resp = post(addr, "/v1.0/jobs/big", &big).await;
    assert_legacy_error(
        &resp,
        400,
        "ERR_BODY_READ",
        "failed to read request body: stream too large",
    );
    assert_eq!(get(addr, "/v1.0/jobs/big").await.status, 500);
    let resp = http(
        addr,
        "PUT",
        "/v1.0/actors/T/1/reminders/big",
        &[],
        big.as_bytes(),
    )
    .await;
    assert_legacy_error(
        &resp,
        400,
        "ERR_MALFORMED_REQUEST",
        "failed deserializing HTTP body: stream too large",
    );
    let one_over = format!(
        r#"{{"schedule":"@daily","data":"{}"}}"#,
        "x".repeat(1001 - 31)
    );
    let resp = post(addr, "/v1.0/jobs/cut", &one_over).await;
    assert_legacy_error(
        &resp,
        400,
        "ERR_MALFORMED_REQUEST",
        "failed deserializing HTTP body: proto: unexpected EOF",
    );
    // Cut at the limit, a trailing space leaves a whole body.
    let spaced = format!(
        r#"{{"schedule":"@daily","data":"{}"}} "#,
        "x".repeat(1000 - 31)
    );
    assert_eq!(post(addr, "/v1.0/jobs/spaced", &spaced).await.status, 204);
    // Exactly at the limit is fine.
    let fits = format!(
        r#"{{"schedule":"@daily","data":"{}"}}"#,
        "x".repeat(1000 - 31)
    );
    assert_eq!(fits.len(), 1000);
    assert_eq!(post(addr, "/v1.0/jobs/fits", &fits).await.status, 204);
}

#[tokio::test]
async fn list_extension_filters_by_prefix_and_owner() {
    let scheduler = engine();
    let mine = state(scheduler.clone(), "myapp", "default");
    let other_app = state(scheduler.clone(), "otherapp", "default");
    let other_ns = state(scheduler, "myapp", "prod");
    let addr = serve_http(mine).await;
    let other_app_addr = serve_http(other_app).await;
    let other_ns_addr = serve_http(other_ns).await;

    for name in ["b-two", "a-one", "b-one"] {
        post_ok(
            addr,
            &format!("/v1.0/jobs/{name}"),
            r#"{"schedule":"@daily"}"#,
        )
        .await;
    }
    let resp = post(
        other_app_addr,
        "/v1.0/jobs/b-theirs",
        r#"{"schedule":"@daily"}"#,
    )
    .await;
    assert_eq!(resp.status, 204);

    let resp = get(addr, "/v1.0/jobs").await;
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.header("content-type"), Some("application/json"));
    let names: Vec<String> = resp.json()["jobs"]
        .as_array()
        .map(|jobs| {
            jobs.iter()
                .map(|j| j["name"].as_str().unwrap_or_default().to_owned())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(names, ["a-one", "b-one", "b-two"]);
    let listed = resp.json()["jobs"][0].clone();
    assert_eq!(listed, get(addr, "/v1.0/jobs/a-one").await.json());

    let resp = get(addr, "/v1.0/jobs?prefix=b-").await;
    assert_eq!(resp.json()["jobs"].as_array().map(Vec::len), Some(2));
    let resp = get(addr, "/v1.0/jobs?prefix=zzz").await;
    assert_eq!(resp.json(), json!({"jobs": []}));

    // Other owners see only their own.
    let resp = get(other_app_addr, "/v1.0/jobs").await;
    assert_eq!(resp.json()["jobs"].as_array().map(Vec::len), Some(1));
    assert_eq!(get(other_app_addr, "/v1.0/jobs/a-one").await.status, 500);
    assert_eq!(
        get(other_ns_addr, "/v1.0/jobs").await.json(),
        json!({"jobs": []})
    );
    assert_eq!(get(other_ns_addr, "/v1.0/jobs/a-one").await.status, 500);
    // Deleting under another owner leaves ours alone.
    assert_eq!(delete(other_ns_addr, "/v1.0/jobs/a-one").await.status, 204);
    assert_eq!(get(addr, "/v1.0/jobs/a-one").await.status, 200);
}

#[tokio::test]
async fn health_metadata_and_unknown_routes() {
    let (addr, _) = server().await;
    let resp = get(addr, "/v1.0/healthz").await;
    assert_eq!(resp.status, 204);
    assert!(resp.body.is_empty());
    assert_eq!(get(addr, "/v1.0/healthz/outbound").await.status, 204);

    let resp = get(addr, "/v1.0/metadata").await;
    assert_eq!(resp.status, 200);
    let meta = resp.json();
    assert_eq!(meta["id"], "myapp");
    assert!(meta["runtimeVersion"].is_string());
    assert_eq!(meta["extended"]["schedulerMode"], "embedded");
    // daprd's actorRuntime: no app hosting actors here, no placement.
    assert_eq!(
        meta["actorRuntime"],
        serde_json::json!({"runtimeStatus": "RUNNING", "hostReady": false})
    );

    // daprd hands what its API routes do not serve to service invocation (daprd 1.18.2).
    let direct = serde_json::json!({
        "errorCode": "ERR_DIRECT_INVOKE",
        "message": "failed getting app id either from the URL path or the header dapr-app-id"
    });
    let resp = get(addr, "/v1.0/nothing").await;
    assert_eq!(resp.status, 404);
    assert_eq!(resp.json(), direct);
    let put = http(addr, "PUT", "/v1.0/jobs/x", &[], b"{}").await;
    assert_eq!(put.status, 404);
    assert_eq!(put.json(), direct);
    assert_eq!(put.header("allow"), None);
    assert_eq!(get(addr, "/v1.0/jobs/").await.status, 200);
}

#[tokio::test]
async fn paths_are_cleaned_like_chi() {
    let (addr, _) = server().await;
    post_ok(addr, "/v1.0//jobs/clean/", r#"{"schedule":"@daily"}"#).await;
    assert_eq!(
        get(addr, "/v1.0/jobs/./clean").await.json()["name"],
        "clean"
    );
    assert_eq!(get(addr, "/v1.0/jobs/x/../clean").await.status, 200);
}

#[tokio::test]
async fn unrenderable_data_is_err_internal() {
    let (addr, st) = server().await;
    // Data an SDK may send over gRPC that protojson cannot print: an unknown type.
    st.schedule_job(rv1::ScheduleJobRequest {
        job: Some(rv1::Job {
            name: "opaque".to_owned(),
            schedule: Some("@daily".to_owned()),
            data: Some(prost_types::Any {
                type_url: "type.googleapis.com/my.Custom".to_owned(),
                value: vec![1, 2, 3],
            }),
            ..Default::default()
        }),
        overwrite: false,
    })
    .await
    .unwrap();
    let resp = get(addr, "/v1.0/jobs/opaque").await;
    assert_legacy_error(
        &resp,
        500,
        "ERR_INTERNAL",
        "failed to encode response as JSON: proto: google.protobuf.Any: unable to resolve \"type.googleapis.com/my.Custom\"",
    );

    // The Python SDK's empty Any prints as {}.
    st.schedule_job(rv1::ScheduleJobRequest {
        job: Some(rv1::Job {
            name: "emptyany".to_owned(),
            schedule: Some("@daily".to_owned()),
            data: Some(prost_types::Any::default()),
            ..Default::default()
        }),
        overwrite: false,
    })
    .await
    .unwrap();
    assert_eq!(
        get(addr, "/v1.0/jobs/emptyany").await.json()["data"],
        json!({})
    );
}

/// daprd answers every API request but the health routes with a `traceparent`: the caller's
/// when valid, else the all-zero one (found by e2e/dapr/differential.sh against daprd 1.18.2).
#[tokio::test]
async fn answers_carry_daprds_traceparent() {
    let (addr, _) = server().await;
    let zero = "00-00000000000000000000000000000000-0000000000000000-00";
    let created = post(addr, "/v1.0/jobs/tp", r#"{"schedule": "@every 1h"}"#).await;
    assert_eq!(created.header("traceparent"), Some(zero));
    let missing = get(addr, "/v1.0/jobs/nope").await;
    assert_eq!(missing.status, 500);
    assert_eq!(missing.header("traceparent"), Some(zero));
    let caller = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let traced = http(
        addr,
        "GET",
        "/v1.0/jobs/tp",
        &[("traceparent", caller)],
        b"",
    )
    .await;
    assert_eq!(traced.header("traceparent"), Some(caller));
    let malformed = http(
        addr,
        "GET",
        "/v1.0/jobs/tp",
        &[("traceparent", "00-x")],
        b"",
    )
    .await;
    assert_eq!(malformed.header("traceparent"), Some(zero));
    assert_eq!(get(addr, "/v1.0/healthz").await.header("traceparent"), None);
}
