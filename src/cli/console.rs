//! The web console: a page at `/jobsd/ui/` on the sidecar's HTTP port that shows and steers this
//! app's jobs through jobsd's own routes (`/jobsd/v1/…`). Its files (HTML, CSS, vanilla JS in
//! `console/`) are built into the binary; nothing is fetched from elsewhere, at build time or in
//! the browser.
//!
//! The shell is served without the API token: a browser cannot add a header when it opens a
//! page, and the shell holds nothing but these fixed files (the same bytes for everyone). Every
//! piece of data comes from the `/jobsd/v1` routes, which require `dapr-api-token` as every
//! route does when `DAPR_API_TOKEN` is set; the page asks for the token, keeps it in the tab's
//! `sessionStorage` and sends it as that header on every call.
//!
//! Every answer carries a Content-Security-Policy that allows only this origin (no inline
//! script or style, no frames, no forms posting elsewhere) and an `ETag`. The page is revalidated
//! on every load (`no-cache`); it names its script and style with a content hash (`?v=`), and
//! those, asked for with the current hash, are cached for a year: a new binary's page asks for
//! new ones.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::LazyLock;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;

/// Where the console lives on the HTTP port.
pub const PATH: &str = "/jobsd/ui";

/// Only this origin: scripts, styles, images and calls; no plugins, frames, or form targets.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; \
     form-action 'none'; frame-ancestors 'none'";

/// The page; `{{name}}` stands for the versioned URL of asset `name`.
const INDEX_TEMPLATE: &str = include_str!("console/index.html");

/// The files under `/jobsd/ui/`: name, content type, bytes.
const ASSETS: [(&str, &str, &str); 4] = [
    (
        "console.css",
        "text/css; charset=utf-8",
        include_str!("console/console.css"),
    ),
    (
        "parts.js",
        "text/javascript; charset=utf-8",
        include_str!("console/parts.js"),
    ),
    (
        "console.js",
        "text/javascript; charset=utf-8",
        include_str!("console/console.js"),
    ),
    (
        "favicon.svg",
        "image/svg+xml",
        include_str!("console/favicon.svg"),
    ),
];

/// A file ready to serve.
struct Asset {
    /// The name under `/jobsd/ui/`.
    name: &'static str,
    /// Its `Content-Type`.
    content_type: &'static str,
    /// Its bytes (the page: with the asset URLs filled in).
    body: Bytes,
    /// A hash of `body`, as the `ETag` and the `?v=` of its URL.
    version: String,
}

/// The page and its assets, hashed once.
struct Files {
    index: Asset,
    assets: Vec<Asset>,
}

/// A hash of `body`: it only has to change when the bytes do, within one build (std's
/// `DefaultHasher::new()` has fixed keys).
fn version_of(body: &str) -> String {
    let mut hasher = DefaultHasher::new();
    body.hash(&mut hasher);
    format!("{:016x}", hasher.finish())
}

static FILES: LazyLock<Files> = LazyLock::new(|| {
    let assets: Vec<Asset> = ASSETS
        .iter()
        .map(|&(name, content_type, body)| Asset {
            name,
            content_type,
            body: Bytes::from_static(body.as_bytes()),
            version: version_of(body),
        })
        .collect();
    let mut index = INDEX_TEMPLATE.to_owned();
    for asset in &assets {
        index = index.replace(
            &format!("{{{{{}}}}}", asset.name),
            &format!("{}?v={}", asset.name, asset.version),
        );
    }
    Files {
        index: Asset {
            name: "index.html",
            content_type: "text/html; charset=utf-8",
            version: version_of(&index),
            body: Bytes::from(index),
        },
        assets,
    }
});

/// The console's routes, to merge into the HTTP API's router outside its token check (see the
/// module's doc).
pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        // Relative, so that it also holds behind a proxy that mounts jobsd under a path.
        .route(PATH, get(|| async { Redirect::permanent("ui/") }))
        .route("/jobsd/ui/", get(index))
        .route("/jobsd/ui/{*asset}", get(asset))
}

/// The `?v=` a page asks for an asset with.
#[derive(Debug, serde::Deserialize)]
struct Versioned {
    v: Option<String>,
}

async fn index(headers: HeaderMap) -> Response {
    serve(&FILES.index, &headers, false)
}

async fn asset(
    Path(name): Path<String>,
    Query(query): Query<Versioned>,
    headers: HeaderMap,
) -> Response {
    if name == "index.html" {
        return index(headers).await;
    }
    match FILES.assets.iter().find(|a| a.name == name) {
        Some(asset) => serve(asset, &headers, query.v.as_deref() == Some(&asset.version)),
        None => (
            StatusCode::NOT_FOUND,
            security_headers("text/plain; charset=utf-8"),
            "404 page not found\n",
        )
            .into_response(),
    }
}

/// The headers every console answer carries.
fn security_headers(content_type: &'static str) -> [(header::HeaderName, HeaderValue); 5] {
    [
        (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
        (
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CONTENT_SECURITY_POLICY),
        ),
        (
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ),
        (
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        ),
        (header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY")),
    ]
}

/// `asset`, or 304 when the browser has these bytes already; cached for a year when asked for
/// by its current version (`immutable`), else revalidated on every use.
fn serve(asset: &Asset, headers: &HeaderMap, immutable: bool) -> Response {
    let etag = format!("\"{}\"", asset.version);
    let cache = if immutable {
        "public, max-age=31536000, immutable"
    } else {
        "no-cache"
    };
    let fresh = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|given| given.split(',').any(|tag| tag.trim() == etag));
    let status = if fresh {
        StatusCode::NOT_MODIFIED
    } else {
        StatusCode::OK
    };
    let body = if fresh {
        Bytes::new()
    } else {
        asset.body.clone()
    };
    let mut response = (status, security_headers(asset.content_type), body).into_response();
    let extra = response.headers_mut();
    extra.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    if let Ok(etag) = HeaderValue::from_str(&etag) {
        extra.insert(header::ETAG, etag);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_names_every_asset_by_its_version() {
        let index = std::str::from_utf8(&FILES.index.body).unwrap();
        assert!(!index.contains("{{"), "a placeholder is left: {index}");
        for asset in &FILES.assets {
            let url = format!("{}?v={}", asset.name, asset.version);
            assert!(index.contains(&url), "{url} missing from the page");
        }
    }
}
