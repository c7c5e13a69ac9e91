//! `DAPR_API_TOKEN` on every route a caller can reach: the routes are read from the routers'
//! source and the gRPC methods from the descriptors the server is built from, so a route or
//! rpc added later without the check fails here. Only daprd's open routes (the health checks)
//! and the console's fixed files stay open; `/metrics` asks for the token unless told not to.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::running::Running;
use common::{any_port, http, sidecar_config, t0};
use jobsd::clock::ManualClock;
use jobsd::config::AppProtocol;
use jobsd::store;
use prost::Message;
use tonic::metadata::MetadataValue;

const TOKEN: &str = "s3cret-token";

/// One route of the HTTP API: method and path pattern, and the file it is declared in.
#[derive(Debug)]
struct Route {
    method: &'static str,
    pattern: String,
    file: PathBuf,
}

/// Every `.route(path, handlers)` of the HTTP routers under `src/`, each method of it. A path
/// that is not a literal is looked up in the file's `…ROUTES` constant arrays.
fn declared_routes() -> Vec<Route> {
    let mut files = Vec::new();
    walk(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut files,
    );
    let mut routes = Vec::new();
    for file in files {
        let source = std::fs::read_to_string(&file).unwrap();
        for (at, _) in source.match_indices(".route(") {
            let call = balanced(&source[at + ".route".len()..]);
            let (path_arg, handlers) = call.split_once(',').unwrap();
            let paths = match path_arg.trim() {
                literal if literal.starts_with('"') => vec![literal.trim_matches('"').to_owned()],
                "PATH" => vec![constant(&source, "PATH")],
                _ => route_arrays(&source),
            };
            assert!(!paths.is_empty(), "cannot resolve {call} in {file:?}");
            for method in ["get", "post", "put", "delete", "patch", "any"] {
                let used = handlers
                    .match_indices(&format!("{method}("))
                    .any(|(i, _)| i == 0 || !handlers.as_bytes()[i - 1].is_ascii_alphanumeric());
                if used {
                    for pattern in &paths {
                        routes.push(Route {
                            method: leak(method.to_uppercase()),
                            pattern: pattern.clone(),
                            file: file.clone(),
                        });
                    }
                }
            }
        }
    }
    routes
}

fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            walk(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The text inside the parentheses that open `s`.
fn balanced(s: &str) -> &str {
    let mut depth = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return &s[1..i];
                }
            }
            _ => {}
        }
    }
    panic!("unbalanced route call: {s:.80}")
}

/// The literal of `const NAME: &str = "…";`.
fn constant(source: &str, name: &str) -> String {
    let decl = format!("const {name}: &str = \"");
    let start = source.find(&decl).unwrap() + decl.len();
    source[start..].split('"').next().unwrap().to_owned()
}

/// The literals of the file's `const …ROUTES: [&str; N] = [...]` arrays.
fn route_arrays(source: &str) -> Vec<String> {
    let mut paths = Vec::new();
    for (at, _) in source.match_indices("ROUTES: [&str;") {
        let body = &source[at..];
        let open = body.find("= [").unwrap() + 3;
        let close = body[open..].find(']').unwrap() + open;
        paths.extend(
            body[open..close]
                .split(',')
                .map(|p| p.trim().trim_matches('"').to_owned())
                .filter(|p| !p.is_empty()),
        );
    }
    paths
}

/// A concrete path for a pattern: every `{param}` filled in.
fn concrete(pattern: &str) -> String {
    pattern
        .split('/')
        .map(|seg| match seg {
            "{*asset}" => "console.js",
            s if s.starts_with('{') => "tok-x",
            s => s,
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// daprd's open routes, and the console's fixed files (a browser cannot add a header when it
/// opens a page; the data comes from the `/jobsd/v1` routes).
fn open_route(route: &Route) -> bool {
    route.method == "GET"
        && (matches!(
            route.pattern.as_str(),
            "/v1.0/healthz" | "/v1.0/healthz/outbound"
        ) || route.file.ends_with("src/cli/console.rs"))
}

async fn sidecar(metrics_require_token: bool) -> Running {
    let mut cfg = sidecar_config(None, AppProtocol::Http, &[]);
    cfg.api_token = Some(TOKEN.to_owned());
    cfg.metrics = Some(any_port());
    cfg.metrics_require_token = metrics_require_token;
    cfg.test_clock = false;
    Running::start(cfg, Arc::new(store::Memory::new()), ManualClock::new(t0())).await
}

#[tokio::test]
async fn every_http_route_needs_the_token_but_daprds_open_ones() {
    let routes = declared_routes();
    // The scan finds the routers it must: Dapr's, jobsd's, the actors', the console's.
    for expected in [
        "/v1.0-alpha1/jobs/{name}",
        "/v1.0/jobs/{name}",
        "/v1.0/schedule/jobs/{name}",
        "/jobsd/v1/jobs/{name}/pause",
        "/jobsd/v1/export",
        "/jobsd/ui/",
    ] {
        assert!(
            routes.iter().any(|r| r.pattern == expected),
            "route scan missed {expected}: {routes:?}"
        );
    }
    assert!(routes.len() > 40, "only {} routes found", routes.len());

    let r = sidecar(true).await;
    let mut failures = Vec::new();
    for route in &routes {
        let path = concrete(&route.pattern);
        let body: &[u8] = if route.method == "GET" { b"" } else { b"{}" };
        let none = http(r.api, route.method, &path, &[], body).await;
        let wrong = http(
            r.api,
            route.method,
            &path,
            &[("dapr-api-token", "s3cret-tokeN")],
            body,
        )
        .await;
        let right = http(
            r.api,
            route.method,
            &path,
            &[("dapr-api-token", TOKEN)],
            body,
        )
        .await;
        let open = open_route(route);
        if (none.status == 401) == open || (wrong.status == 401) == open || right.status == 401 {
            failures.push(format!(
                "{} {path} ({}): without {} / wrong {} / right {}",
                route.method,
                route.file.display(),
                none.status,
                wrong.status,
                right.status
            ));
        }
        if !open {
            assert_eq!(
                none.text(),
                "invalid api token\n",
                "{} {path}",
                route.method
            );
        }
    }
    assert!(
        failures.is_empty(),
        "token not enforced as expected:\n{}",
        failures.join("\n")
    );

    // The token must match whole: a prefix, the token with a suffix, other case.
    for given in ["s3cret", "s3cret-token2", "S3CRET-TOKEN", ""] {
        let resp = http(
            r.api,
            "GET",
            "/v1.0/jobs",
            &[("dapr-api-token", given)],
            b"",
        )
        .await;
        assert_eq!(resp.status, 401, "{given:?}");
    }
    // A method a route does not serve is refused before routing too: no `Allow` (daprd
    // 1.18.2, e2e/dapr/differential.sh B34).
    for method in ["PUT", "PATCH", "HEAD"] {
        let resp = http(r.api, method, "/v1.0/jobs/x", &[], b"").await;
        assert_eq!(resp.status, 401, "{method}");
        assert_eq!(resp.header("allow"), None, "{method}");
    }
    // A path that routes nowhere (or only after cleaning) is refused before routing.
    for path in [
        "/nowhere",
        "/v1.0//jobs/x",
        "/v1.0/healthz/../jobs/x",
        "/jobsd/v1/../v1.0/jobs",
    ] {
        assert_eq!(
            http(r.api, "GET", path, &[], b"").await.status,
            401,
            "{path}"
        );
    }
    r.stop().await;
}

#[tokio::test]
async fn metrics_need_the_token_when_one_is_set_unless_opted_out() {
    let r = sidecar(true).await;
    let metrics = r.sidecar.metrics_addr.unwrap();
    assert_eq!(http(metrics, "GET", "/metrics", &[], b"").await.status, 401);
    let wrong = [("dapr-api-token", "nope")];
    assert_eq!(
        http(metrics, "GET", "/metrics", &wrong, b"").await.status,
        401
    );
    let header = [("dapr-api-token", TOKEN)];
    assert_eq!(
        http(metrics, "GET", "/metrics", &header, b"").await.status,
        200
    );
    let bearer = format!("Bearer {TOKEN}");
    let bearer = [("Authorization", bearer.as_str())];
    assert_eq!(
        http(metrics, "GET", "/metrics", &bearer, b"").await.status,
        200
    );
    r.stop().await;

    let open = sidecar(false).await;
    let metrics = open.sidecar.metrics_addr.unwrap();
    assert_eq!(http(metrics, "GET", "/metrics", &[], b"").await.status, 200);
    open.stop().await;
}

/// A method of a gRPC service: full path and whether each side streams.
struct Method {
    path: String,
    client_streaming: bool,
    server_streaming: bool,
}

/// Every method of every service in the descriptors the API server is built from.
fn described_methods() -> Vec<Method> {
    let set = prost_types::FileDescriptorSet::decode(jobsd::proto::FILE_DESCRIPTOR_SET).unwrap();
    let mut methods = Vec::new();
    for file in &set.file {
        for service in &file.service {
            for method in &service.method {
                methods.push(Method {
                    path: format!("/{}.{}/{}", file.package(), service.name(), method.name()),
                    client_streaming: method.client_streaming(),
                    server_streaming: method.server_streaming(),
                });
            }
        }
    }
    methods
}

/// Calls `method` with an empty message (and `token`, if any); the status code it ends with.
async fn call(
    channel: tonic::transport::Channel,
    method: &Method,
    token: Option<&str>,
) -> tonic::Code {
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.unwrap();
    let path: http::uri::PathAndQuery = method.path.parse().unwrap();
    let codec = tonic_prost::ProstCodec::<(), ()>::default();
    fn with_token<T>(token: Option<&str>, message: T) -> tonic::Request<T> {
        let mut req = tonic::Request::new(message);
        if let Some(token) = token {
            req.metadata_mut()
                .insert("dapr-api-token", MetadataValue::try_from(token).unwrap());
        }
        req
    }
    let result = match (method.client_streaming, method.server_streaming) {
        (false, false) => grpc
            .unary(with_token(token, ()), path, codec)
            .await
            .map(|_| ()),
        (false, true) => match grpc
            .server_streaming(with_token(token, ()), path, codec)
            .await
        {
            Ok(resp) => resp.into_inner().message().await.map(|_| ()),
            Err(e) => Err(e),
        },
        (true, false) => {
            let stream = tokio_stream::iter(vec![()]);
            grpc.client_streaming(with_token(token, stream), path, codec)
                .await
                .map(|_| ())
        }
        (true, true) => {
            let stream = tokio_stream::iter(vec![()]);
            match grpc.streaming(with_token(token, stream), path, codec).await {
                Ok(resp) => resp.into_inner().message().await.map(|_| ()),
                Err(e) => Err(e),
            }
        }
    };
    match result {
        Ok(()) => tonic::Code::Ok,
        Err(status) => status.code(),
    }
}

#[tokio::test]
async fn every_grpc_method_served_on_the_api_port_needs_the_token() {
    let r = sidecar(true).await;
    let channel =
        tonic::transport::Endpoint::from_shared(format!("http://{}", r.sidecar.grpc_addrs[0]))
            .unwrap()
            .connect()
            .await
            .unwrap();
    let methods = described_methods();
    let mut served = 0;
    let mut failures = Vec::new();
    for method in &methods {
        let none = call(channel.clone(), method, None).await;
        if none == tonic::Code::Unimplemented {
            // A service of the descriptors not on this port (the Scheduler's, the store's).
            continue;
        }
        served += 1;
        let wrong = call(channel.clone(), method, Some("nope")).await;
        let right = call(channel.clone(), method, Some(TOKEN)).await;
        if none != tonic::Code::Unauthenticated
            || wrong != tonic::Code::Unauthenticated
            || right == tonic::Code::Unauthenticated
        {
            failures.push(format!(
                "{}: without {none:?} / wrong {wrong:?} / right {right:?}",
                method.path
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "token not enforced:\n{}",
        failures.join("\n")
    );
    // Dapr's jobs rpcs (stable and Alpha1), the actors' and jobsd.v1.Jobs.
    assert!(
        methods
            .iter()
            .any(|m| m.path == "/jobsd.v1.Jobs/ExportJobs"),
        "jobsd.v1.Jobs missing from the descriptors"
    );
    assert!(
        served >= 30,
        "only {served} methods answered on the API port"
    );
    r.stop().await;
}
