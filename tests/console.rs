//! Issue 14, the web console (`--console`, `/jobsd/ui/` on the HTTP port): its files are served
//! with their content types, a self-only Content-Security-Policy and caching headers; unknown
//! files are 404; `--console=false` serves none; with `DAPR_API_TOKEN` the page shell loads
//! without the token (a browser cannot send it when opening a page) but every data route the
//! page calls refuses without it. A real sidecar over a memory store.

mod common;

use std::sync::Arc;

use common::running::Running;
use common::{HttpResponse, http, sidecar_config, t0};
use jobsd::clock::ManualClock;
use jobsd::config::{self, AppProtocol};
use jobsd::store;

const TOKEN: &str = "console-s3cret";

async fn start(edit: impl FnOnce(&mut config::Sidecar)) -> Running {
    let mut cfg = sidecar_config(None, AppProtocol::Http, &[]);
    edit(&mut cfg);
    Running::start(cfg, Arc::new(store::Memory::new()), ManualClock::new(t0())).await
}

async fn get(r: &Running, path: &str, headers: &[(&str, &str)]) -> HttpResponse {
    http(r.api, "GET", path, headers, b"").await
}

/// The versioned URL (`name?v=…`) the page names asset `name` by.
fn versioned_url(page: &str, name: &str) -> String {
    let at = page
        .find(&format!("\"{name}?v="))
        .unwrap_or_else(|| panic!("the page does not name {name}: {page}"));
    let rest = &page[at + 1..];
    let url = &rest[..rest.find('"').unwrap()];
    format!("/jobsd/ui/{url}")
}

fn assert_console_headers(r: &HttpResponse, content_type: &str) {
    assert_eq!(r.header("content-type"), Some(content_type));
    let csp = r.header("content-security-policy").expect("a CSP header");
    for directive in [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "connect-src 'self'",
        "frame-ancestors 'none'",
    ] {
        assert!(csp.contains(directive), "{directive} missing from {csp}");
    }
    assert!(!csp.contains("unsafe"), "{csp}");
    assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
    assert!(r.header("etag").is_some());
}

#[tokio::test]
async fn the_page_and_its_files_have_their_types_csp_and_caching() {
    let r = start(|_| {}).await;

    let bare = get(&r, "/jobsd/ui", &[]).await;
    assert_eq!(bare.status, 308);
    assert_eq!(bare.header("location"), Some("ui/"));

    let page = get(&r, "/jobsd/ui/", &[]).await;
    assert_eq!(page.status, 200);
    assert_console_headers(&page, "text/html; charset=utf-8");
    assert_eq!(page.header("cache-control"), Some("no-cache"));
    let html = page.text();
    assert!(html.contains("<title>jobsd console</title>"));
    // Under the CSP an inline script, style or handler would not run: the page has none.
    assert!(
        !html.contains("<script>") && !html.contains("style="),
        "{html}"
    );
    assert!(!html.contains(" onclick="), "{html}");
    // Nothing from elsewhere.
    assert!(
        !html.contains("http://") && !html.contains("https://"),
        "{html}"
    );
    assert_eq!(get(&r, "/jobsd/ui/index.html", &[]).await.text(), html);

    for (name, content_type) in [
        ("console.js", "text/javascript; charset=utf-8"),
        ("parts.js", "text/javascript; charset=utf-8"),
        ("console.css", "text/css; charset=utf-8"),
        ("favicon.svg", "image/svg+xml"),
    ] {
        let url = versioned_url(&html, name);
        let current = get(&r, &url, &[]).await;
        assert_eq!(current.status, 200, "{url}");
        assert_console_headers(&current, content_type);
        assert_eq!(
            current.header("cache-control"),
            Some("public, max-age=31536000, immutable"),
            "{url}"
        );
        assert!(!current.body.is_empty());
        // Asked for without (or with another) version: the same bytes, revalidated.
        let plain = get(&r, &format!("/jobsd/ui/{name}?v=old"), &[]).await;
        assert_eq!(plain.status, 200);
        assert_eq!(plain.header("cache-control"), Some("no-cache"));
        assert_eq!(plain.body, current.body);
        // A browser that has them gets 304 and no body.
        let etag = current.header("etag").unwrap().to_owned();
        let again = get(&r, &url, &[("If-None-Match", &etag)]).await;
        assert_eq!(again.status, 304);
        assert!(again.body.is_empty());
    }
    let mut js = String::new();
    for name in ["parts.js", "console.js"] {
        js += &get(&r, &versioned_url(&html, name), &[]).await.text();
    }
    assert!(js.contains("dapr-api-token"), "the page sends the token");
    assert!(
        !js.contains("innerHTML"),
        "data goes on the page as text only"
    );

    // HEAD is answered like GET, without a body; writes are not.
    let head = http(r.api, "HEAD", "/jobsd/ui/", &[], b"").await;
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty());
    assert_eq!(
        http(r.api, "POST", "/jobsd/ui/", &[], b"").await.status,
        405
    );
    r.stop().await;
}

#[tokio::test]
async fn unknown_files_are_404() {
    let r = start(|_| {}).await;
    for path in [
        "/jobsd/ui/nope.js",
        "/jobsd/ui/console.js.map",
        "/jobsd/ui/css/console.css",
        "/jobsd/ui/..%2Fv1%2Fjobs",
    ] {
        let answer = get(&r, path, &[]).await;
        assert_eq!(answer.status, 404, "{path}");
        assert_eq!(answer.text(), "404 page not found\n", "{path}");
    }
    r.stop().await;
}

#[tokio::test]
async fn console_false_serves_nothing() {
    let r = start(|c| c.console = false).await;
    for path in ["/jobsd/ui", "/jobsd/ui/", "/jobsd/ui/console.js"] {
        assert_eq!(get(&r, path, &[]).await.status, 404, "{path}");
    }
    // The API is unchanged.
    assert_eq!(get(&r, "/jobsd/v1/jobs", &[]).await.status, 200);
    r.stop().await;
}

#[test]
fn the_console_flag_defaults_on_and_takes_false() {
    let console = |args: &[&str]| {
        let argv = ["jobsd", "--app-id", "a"].iter().chain(args).copied();
        let (cli, _) = config::parse(argv).unwrap();
        cli.sidecar
            .validate(config::Env::default())
            .unwrap()
            .console
    };
    assert!(console(&[]));
    assert!(console(&["--console"]));
    assert!(console(&["--console=true"]));
    assert!(!console(&["--console=false"]));
}

#[tokio::test]
async fn with_a_token_the_shell_loads_but_its_data_needs_the_token() {
    let r = start(|c| c.api_token = Some(TOKEN.to_owned())).await;
    let with = [("dapr-api-token", TOKEN)];
    let create = http(
        r.api,
        "POST",
        "/jobsd/v1/jobs/payroll-secret",
        &with,
        br#"{"schedule":"@every 1h","labels":{"team":"billing"}}"#,
    )
    .await;
    assert_eq!(create.status, 204, "{}", create.text());

    // The shell and its files: served to anyone, and they hold no data.
    let page = get(&r, "/jobsd/ui/", &[]).await;
    assert_eq!(page.status, 200);
    assert!(!page.text().contains("payroll-secret"));
    let js = get(&r, &versioned_url(&page.text(), "console.js"), &[]).await;
    assert_eq!(js.status, 200);
    assert!(!js.text().contains("payroll-secret"));

    // Every route the page calls refuses without the token, and answers with it.
    for path in [
        "/jobsd/v1/jobs?pageSize=50",
        "/jobsd/v1/jobs/payroll-secret",
        "/jobsd/v1/jobs/payroll-secret/runs?limit=20",
        "/v1.0/metadata",
    ] {
        let without = get(&r, path, &[]).await;
        assert_eq!(without.status, 401, "{path}");
        assert!(!without.text().contains("payroll-secret"), "{path}");
        let wrong = get(&r, path, &[("dapr-api-token", "guess")]).await;
        assert_eq!(wrong.status, 401, "{path}");
        let right = get(&r, path, &with).await;
        assert_eq!(right.status, 200, "{path}: {}", right.text());
    }
    let list = get(&r, "/jobsd/v1/jobs", &with).await.json();
    assert_eq!(list["jobs"][0]["name"], "payroll-secret");
    for action in ["pause", "resume", "trigger"] {
        let path = format!("/jobsd/v1/jobs/payroll-secret/{action}");
        assert_eq!(http(r.api, "POST", &path, &[], b"").await.status, 401);
    }
    // An unknown file is a 404 with or without the token: there is nothing behind it.
    assert_eq!(get(&r, "/jobsd/ui/nope", &[]).await.status, 404);
    r.stop().await;
}
