//! TLS between a sidecar and its Scheduler replica, with certificates made by the test:
//! TLS and mTLS carry every call and the triggers; a sidecar that cannot prove itself (no
//! TLS, no client certificate, one from another CA) or that should not trust the replica
//! (another CA, an expired certificate, the wrong name) gets its create refused.

mod common;

use std::net::SocketAddr;

use chrono::TimeDelta;
use common::app::{self, HttpApp};
use common::certs::{Ca, Leaf};
use common::replica::Rep;
use common::{HttpResponse, eventually, http, sidecar_config};
use jobsd::app::Sidecar;
use jobsd::config::AppProtocol;
use jobsd::tls::{ClientTls, PemFile};

/// A sidecar of `myapp` in front of `rep` over `tls`, delivering to `app`.
async fn sidecar(rep: &Rep, app: Option<SocketAddr>, tls: Option<ClientTls>) -> Sidecar {
    let mut cfg = sidecar_config(app, AppProtocol::Http, &[rep.address()]);
    cfg.scheduler_tls = tls;
    Sidecar::start(cfg).await.unwrap()
}

async fn send(side: &Sidecar, method: &str, path: &str, body: &str) -> HttpResponse {
    http(side.http_addrs[0], method, path, &[], body.as_bytes()).await
}

async fn stop(side: Sidecar) {
    side.shutdown_token().cancel();
    side.wait().await.unwrap();
}

/// A replica on `127.0.0.1` with a certificate of `ca`, requiring client certificates of
/// `ca` when `mutual`.
async fn replica(ca: &Ca, mutual: bool) -> Rep {
    let server = ca.leaf("replica", &["127.0.0.1"]);
    let own = ca.leaf("replica-client", &["replica-client"]);
    Rep::start_tls(
        Ca::server(&server, mutual.then_some(ca)),
        ca.client(Some(&own), None),
    )
    .await
}

/// Creates, reads, deletes and has a job fire through `side` in front of `rep`.
async fn round_trip(rep: &Rep, side: &Sidecar, app: &HttpApp) {
    eventually("3 job streams", async || {
        side.remote().unwrap().job_streams() == 3
    })
    .await;
    let r = send(
        side,
        "POST",
        "/v1.0/jobs/once",
        r#"{"dueTime":"1s","data":"d"}"#,
    )
    .await;
    assert_eq!(r.status, 204, "{}", r.text());
    let r = send(side, "POST", "/v1.0/jobs/later", r#"{"dueTime":"1h"}"#).await;
    assert_eq!(r.status, 204, "{}", r.text());
    let r = send(side, "GET", "/v1.0/jobs/later", "").await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.text().contains(r#""dueTime":"1h""#), "{}", r.text());
    let r = send(side, "DELETE", "/v1.0/jobs/later", "").await;
    assert_eq!(r.status, 204, "{}", r.text());
    assert!(!rep.exists("later").await);
    rep.run_for(TimeDelta::seconds(5)).await;
    assert_eq!(app.bodies("once"), [r#""d""#]);
}

#[tokio::test]
async fn tls_and_mtls_carry_calls_and_triggers() {
    let ca = Ca::new("ca");
    let client = ca.leaf("sidecar", &["myapp"]);
    for mutual in [false, true] {
        let rep = replica(&ca, mutual).await;
        let app = HttpApp::new();
        let tls = ca.client(mutual.then_some(&client), None);
        let side = sidecar(&rep, Some(app::serve(app.clone()).await), Some(tls)).await;
        round_trip(&rep, &side, &app).await;
        stop(side).await;
        rep.stop().await;
    }
}

#[tokio::test]
async fn a_server_name_override_checks_the_name_instead_of_the_ip() {
    // Replicas announce themselves by IP; their certificates often carry a name only.
    let ca = Ca::new("ca");
    let server = ca.leaf("replica", &["scheduler.jobsd.test"]);
    let own = ca.leaf("own", &["own"]);
    let rep = Rep::start_tls(
        Ca::server(&server, None),
        ca.client(Some(&own), Some("scheduler.jobsd.test")),
    )
    .await;
    let app = HttpApp::new();
    let tls = ca.client(None, Some("scheduler.jobsd.test"));
    let side = sidecar(&rep, Some(app::serve(app.clone()).await), Some(tls)).await;
    round_trip(&rep, &side, &app).await;
    stop(side).await;
    rep.stop().await;
}

/// Asserts that a create through `side` fails as daprd's does when it cannot reach a
/// Scheduler (504 `DeadlineExceeded` after its 30 s deadline), with a message that says
/// `why`, and that the replica holds no job.
async fn create_refused(rep: &Rep, side: &Sidecar, why: &str) {
    let started = std::time::Instant::now();
    let r = send(side, "POST", "/v1.0/jobs/j", r#"{"dueTime":"1s"}"#).await;
    eprintln!(
        "refused after {:?}: {} {}",
        started.elapsed(),
        r.status,
        r.text()
    );
    assert_eq!(r.status, 504, "{}", r.text());
    assert!(r.text().contains("DeadlineExceeded"), "{}", r.text());
    assert!(r.text().contains(why), "want {why:?} in {}", r.text());
    assert!(!rep.exists("j").await);
}

/// A sidecar of `myapp` in front of `rep` over TLS trusting `ca`, presenting `leaf` if given,
/// checking `server_name` if given.
async fn sidecar_of(rep: &Rep, ca: &Ca, leaf: Option<&Leaf>, server_name: Option<&str>) -> Sidecar {
    let tls = ClientTls::load(
        PemFile::new("--scheduler-tls-ca", &ca.cert),
        leaf.map(|l| {
            (
                PemFile::new("--scheduler-tls-cert", &l.cert),
                PemFile::new("--scheduler-tls-key", &l.key),
            )
        }),
        server_name.map(str::to_owned),
    )
    .unwrap();
    sidecar(rep, None, Some(tls)).await
}

// One test, so that the 30 s each case waits (daprd's deadline) are waited together.
#[tokio::test]
async fn a_sidecar_and_a_replica_that_cannot_trust_each_other_fail_the_create_with_the_reason() {
    let ca = Ca::new("ca");
    let other = Ca::new("other");
    let own = ca.leaf("own", &["own"]);
    let stranger = other.leaf("stranger", &["myapp"]);

    // The sidecar cannot prove itself: plaintext to a TLS replica; to an mTLS replica,
    // without a certificate or with one of another CA.
    let tls = replica(&ca, false).await;
    let mtls = replica(&ca, true).await;
    let plaintext = sidecar(&tls, None, None).await;
    let anonymous = sidecar_of(&mtls, &ca, None, None).await;
    let foreign = sidecar_of(&mtls, &ca, Some(&stranger), None).await;
    // The sidecar should not trust the replica: a certificate of a CA it does not trust, an
    // expired one, one for another name than the one it expects.
    let untrusted = replica(&other, false).await;
    let expired = Rep::start_tls(
        Ca::server(&ca.expired_leaf("expired", &["127.0.0.1"]), None),
        ca.client(Some(&own), None),
    )
    .await;
    let to_untrusted = sidecar_of(&untrusted, &ca, None, None).await;
    let to_expired = sidecar_of(&expired, &ca, None, None).await;
    let to_misnamed = sidecar_of(&tls, &ca, None, Some("elsewhere.jobsd.test")).await;

    tokio::join!(
        // The replica hangs up on bytes that are not TLS.
        create_refused(&tls, &plaintext, "latest connection error: 127.0.0.1"),
        create_refused(&mtls, &anonymous, "CertificateRequired"),
        create_refused(&mtls, &foreign, "UnknownCA"),
        create_refused(&untrusted, &to_untrusted, "UnknownIssuer"),
        create_refused(&expired, &to_expired, "certificate expired"),
        create_refused(&tls, &to_misnamed, "not valid for name"),
    );
    for side in [
        plaintext,
        anonymous,
        foreign,
        to_untrusted,
        to_expired,
        to_misnamed,
    ] {
        stop(side).await;
    }
    for rep in [tls, mtls, untrusted, expired] {
        rep.stop().await;
    }
}
