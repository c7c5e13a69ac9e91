//! One app cannot reach another app's or namespace's jobs through its sidecar's API, by any
//! name or prefix trick: `..`, `/` and `%2F`, the key separator `||`, look-alike characters,
//! a prefix that spans the app-id boundary (`my` against `myapp`), an export imported
//! elsewhere. Tried where many apps share one store: sidecars over one engine (as the
//! embedded scheduler keys them) and sidecars in remote mode on one `jobsd scheduler`.

mod common;

use std::collections::BTreeMap;
use std::net::SocketAddr;

use common::replica::Rep;
use common::{eventually, http, serve_grpc, serve_http, sidecar_config, state};
use jobsd::app::Sidecar;
use jobsd::config::AppProtocol;
use jobsd::proto::runtime::{self as rv1, dapr_client::DaprClient};

/// The apps: (app id, namespace). `my` is a prefix of `myapp` and `myapp2` extends it.
const TENANTS: [(&str, &str); 5] = [
    ("myapp", "default"),
    ("other", "default"),
    ("myapp", "prod"),
    ("my", "default"),
    ("myapp2", "default"),
];

/// Every tenant's jobs: the same names everywhere, each job's data naming its owner.
const NAMES: [&str; 3] = ["secret", "shared", "app-x"];

/// Names (already URL-escaped) aimed at a victim's `secret`.
fn tricks(victim: (&str, &str)) -> Vec<String> {
    let (app, ns) = victim;
    vec![
        format!("..%2F{app}%2Fsecret"),
        format!("%2E%2E%2F{app}%2Fsecret"),
        format!("{app}%7C%7Csecret"),
        format!("%7C%7C{app}%7C%7Csecret"),
        format!("..%7C%7C{app}%7C%7Csecret"),
        format!("app%7C%7C{ns}%7C%7C{app}%7C%7Csecret"),
        format!("%7C%7C{ns}%7C%7C{app}%7C%7Csecret"),
        format!("{ns}%2F{app}%2Fsecret"),
        "%EF%BD%93ecret".to_owned(), // ｓecret
        "secret%E2%80%8B".to_owned(),
        "secret%00".to_owned(),
        "SECRET".to_owned(),
        "secret%20".to_owned(),
        "*".to_owned(),
        "%2A".to_owned(),
    ]
}

/// Prefixes a delete-by-prefix or list could try to widen with.
const PREFIXES: [&str; 8] = [
    "",
    "%7C%7C",
    "..",
    "app%7C%7C",
    "app%7C%7Cdefault%7C%7Cmyapp",
    "%7C%7Cmyapp",
    "app",
    "%2F",
];

/// A tenant's sidecar: its HTTP and gRPC addresses.
#[derive(Clone, Copy)]
struct Tenant {
    id: (&'static str, &'static str),
    http: SocketAddr,
    grpc: SocketAddr,
}

/// The data of a tenant's jobs: text no trick name holds, so that an echoed name in an
/// error is not mistaken for a leak.
fn data_of(id: (&str, &str)) -> String {
    format!("payload of {}:{}", id.1, id.0)
}

async fn create_all(tenants: &[Tenant]) {
    for t in tenants {
        for name in NAMES {
            let body = format!(
                r#"{{"schedule":"@every 1h","data":{}}}"#,
                serde_json::to_string(&data_of(t.id)).unwrap()
            );
            let resp = http(
                t.http,
                "POST",
                &format!("/v1.0-alpha1/jobs/{name}"),
                &[],
                body.as_bytes(),
            )
            .await;
            assert_eq!(resp.status, 204, "{:?} {name}: {}", t.id, resp.text());
        }
    }
}

/// What tenant `t` sees: job name → data.
async fn seen(t: &Tenant) -> BTreeMap<String, String> {
    let resp = http(t.http, "GET", "/v1.0/jobs", &[], b"").await;
    assert_eq!(resp.status, 200, "{}", resp.text());
    resp.json()["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| {
            (
                j["name"].as_str().unwrap().to_owned(),
                j["data"].to_string(),
            )
        })
        .collect()
}

/// Every tenant still has its own jobs, all of them, and nothing else.
async fn assert_untouched(tenants: &[Tenant], after: &str) {
    for t in tenants {
        let jobs = seen(t).await;
        let names: Vec<&str> = jobs.keys().map(String::as_str).collect();
        let mut expected = NAMES.to_vec();
        expected.sort();
        assert_eq!(names, expected, "{:?} after {after}", t.id);
        let own = data_of(t.id);
        assert!(
            jobs.values().all(|d| d.contains(&format!("\"{own}\""))),
            "{:?} after {after}: {jobs:?}",
            t.id
        );
    }
}

/// Every trick from every tenant at every other one, then deletes of the tricks and
/// prefixes, then the backup routes (where the scheduler has them).
async fn attack(tenants: &[Tenant], backups: bool) {
    create_all(tenants).await;
    assert_untouched(tenants, "the creates").await;
    for attacker in tenants {
        let own = data_of(attacker.id);
        for victim in tenants.iter().filter(|v| v.id != attacker.id) {
            let theirs = format!("\"{}\"", data_of(victim.id));
            for name in tricks(victim.id) {
                for route in ["/v1.0-alpha1/jobs/", "/v1.0/jobs/", "/jobsd/v1/jobs/"] {
                    let got = http(attacker.http, "GET", &format!("{route}{name}"), &[], b"").await;
                    assert!(
                        !got.text().contains(&theirs),
                        "{:?} read {:?}'s job with {route}{name}: {}",
                        attacker.id,
                        victim.id,
                        got.text()
                    );
                }
            }
            // Lists with any prefix show the caller's jobs only.
            for prefix in PREFIXES {
                for list in ["/v1.0/jobs?prefix=", "/jobsd/v1/jobs?prefix="] {
                    let got =
                        http(attacker.http, "GET", &format!("{list}{prefix}"), &[], b"").await;
                    assert!(
                        !got.text().contains(&theirs),
                        "{:?} listed {:?}'s jobs with {list}{prefix}: {}",
                        attacker.id,
                        victim.id,
                        got.text()
                    );
                }
            }
        }
        let jobs = seen(attacker).await;
        assert!(
            jobs.values().all(|d| d.contains(&format!("\"{own}\""))),
            "{jobs:?}"
        );
    }
    for attacker in tenants {
        for victim in tenants.iter().filter(|v| v.id != attacker.id) {
            for name in tricks(victim.id) {
                for route in ["/v1.0-alpha1/jobs/", "/jobsd/v1/jobs/"] {
                    http(attacker.http, "DELETE", &format!("{route}{name}"), &[], b"").await;
                    http(
                        attacker.http,
                        "POST",
                        &format!("/jobsd/v1/jobs/{name}/pause"),
                        &[],
                        b"",
                    )
                    .await;
                }
            }
        }
        // Delete-by-prefix, with prefixes that would span the app-id boundary if the key
        // were built without its separator (`my` + `app…`). "" deletes all of the caller's
        // jobs, so it goes last and the caller's jobs are made again.
        let mut dapr = DaprClient::connect(format!("http://{}", attacker.grpc))
            .await
            .unwrap();
        for prefix in [
            "app",
            "app||",
            "||",
            "..",
            "/",
            "||default||myapp",
            "app||default||myapp||",
            "",
        ] {
            let _ = dapr
                .delete_jobs_by_prefix_alpha1(rv1::DeleteJobsByPrefixRequestAlpha1 {
                    name_prefix: Some(prefix.to_owned()),
                })
                .await;
        }
        let others: Vec<Tenant> = tenants
            .iter()
            .filter(|v| v.id != attacker.id)
            .copied()
            .collect();
        assert_untouched(&others, &format!("{:?}'s deletes", attacker.id)).await;
        create_all(std::slice::from_ref(attacker)).await;
    }
    assert_untouched(tenants, "every trick").await;

    if backups {
        // An export of one app imported into another becomes the importer's jobs; the
        // exporter's stay its own.
        let (from, into) = (&tenants[1], &tenants[3]);
        let export = http(from.http, "GET", "/jobsd/v1/export", &[], b"").await;
        assert_eq!(export.status, 200, "{}", export.text());
        let imported = http(
            into.http,
            "POST",
            "/jobsd/v1/import?overwrite=true",
            &[],
            &export.body,
        )
        .await;
        assert_eq!(imported.status, 200, "{}", imported.text());
        assert_untouched(&tenants[..3], "an import into another app").await;
        let taken = seen(into).await;
        assert_eq!(taken.len(), NAMES.len(), "{taken:?}");
        // The data travels (it is the job's payload); the owner is the importer.
        let exported = format!("\"{}\"", data_of(from.id));
        assert!(taken.values().all(|d| d.contains(&exported)), "{taken:?}");
        // The importer's own jobs back, for what follows.
        for name in NAMES {
            let path = format!("/v1.0-alpha1/jobs/{name}");
            assert_eq!(http(into.http, "DELETE", &path, &[], b"").await.status, 204);
        }
        create_all(std::slice::from_ref(into)).await;
    }
}

/// App ids and namespaces holding the key separator, which would put their keys inside
/// `myapp`'s (`app||default||myapp||x||…`): a daprd accepts such an app id (it refuses only
/// dots), so the scheduler side must refuse them.
const SMUGGLERS: [(&str, &str); 2] = [("myapp||x", "default"), ("x", "default||myapp")];

/// A smuggler's creates are refused and nobody's jobs change.
async fn smuggle(smuggler: Tenant, tenants: &[Tenant]) {
    for name in NAMES {
        let body = br#"{"schedule":"@every 1h","data":"smuggled"}"#;
        let resp = http(
            smuggler.http,
            "POST",
            &format!("/v1.0-alpha1/jobs/{name}"),
            &[],
            body,
        )
        .await;
        assert_ne!(resp.status, 204, "{:?} stored {name}", smuggler.id);
        let read = http(
            smuggler.http,
            "GET",
            &format!("/v1.0-alpha1/jobs/{name}"),
            &[],
            b"",
        )
        .await;
        assert!(
            !read.text().contains("payload of"),
            "{:?}: {}",
            smuggler.id,
            read.text()
        );
    }
    assert_untouched(tenants, &format!("{:?}'s creates", smuggler.id)).await;
}

#[tokio::test]
async fn apps_sharing_one_engine_cannot_reach_each_others_jobs() {
    let engine = common::engine();
    let mut tenants = Vec::new();
    for id in TENANTS {
        let st = state(engine.clone(), id.0, id.1);
        tenants.push(Tenant {
            id,
            http: serve_http(st.clone()).await,
            grpc: serve_grpc(st).await,
        });
    }
    attack(&tenants, true).await;
    for id in SMUGGLERS {
        let st = state(engine.clone(), id.0, id.1);
        let smuggler = Tenant {
            id,
            http: serve_http(st.clone()).await,
            grpc: serve_grpc(st).await,
        };
        smuggle(smuggler, &tenants).await;
    }
}

#[tokio::test]
async fn sidecars_on_one_replica_cannot_reach_each_others_jobs() {
    let rep = Rep::start().await;
    let mut sidecars: Vec<Sidecar> = Vec::new();
    let mut tenants = Vec::new();
    for id in TENANTS.into_iter().chain(SMUGGLERS) {
        let mut cfg = sidecar_config(None, AppProtocol::Http, &[rep.address()]);
        cfg.app_id = id.0.to_owned();
        cfg.namespace = id.1.to_owned();
        let sidecar = Sidecar::start(cfg).await.unwrap();
        let addr = sidecar.http_addrs[0];
        eventually("the sidecar knows its replicas", async || {
            http(addr, "GET", "/v1.0/healthz", &[], b"").await.status == 204
        })
        .await;
        tenants.push(Tenant {
            id,
            http: addr,
            grpc: sidecar.grpc_addrs[0],
        });
        sidecars.push(sidecar);
    }
    let smugglers = tenants.split_off(TENANTS.len());
    attack(&tenants, false).await;
    for smuggler in smugglers {
        smuggle(smuggler, &tenants).await;
    }
    for sidecar in sidecars {
        sidecar.shutdown_token().cancel();
        sidecar.wait().await.unwrap();
    }
    rep.stop().await;
}
