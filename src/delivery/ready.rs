//! When the sidecar counts as started on the app's side: daprd's `/v1.0/healthz` answers 500
//! until its runtime is initialised, and with an app port that means the app listens and (with
//! no app health check) the app's `/dapr/config` has been read, so that its actor types are
//! registered before anyone is told the sidecar is up (dapr/dapr `pkg/runtime/runtime.go`:
//! `initRuntime` → `blockUntilAppIsReady`, then `appHealthChanged` → `loadAppConfiguration`,
//! all before the `runtime` healthz target is ready). An SDK that waits for the sidecar's
//! health and then calls an actor right away relies on it.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// Between two connection attempts while waiting for the app's port (daprd's 100 ms).
const PORT_POLL: Duration = Duration::from_millis(100);

/// What the sidecar waits for before it is ready, on the app's side.
pub enum AppStart {
    /// No app port: nothing to wait for.
    Nothing,
    /// The app's port accepts connections (a gRPC app, or an app with health checks: daprd
    /// reads an app's config only once its probes pass, after it is ready).
    Port(SocketAddr),
    /// The app's config has been read once (`true` on the watch): an HTTP app without health
    /// checks. Reading it needs the port open, so that is waited for too.
    Config(watch::Receiver<bool>),
}

/// `true` from the moment the app side is started, for good (daprd's runtime target, once
/// ready, stays ready; app health is reported elsewhere).
pub fn app_started(start: AppStart, stop: CancellationToken) -> watch::Receiver<bool> {
    let (tx, rx) = watch::channel(matches!(start, AppStart::Nothing));
    match start {
        // Started from the beginning; readers only borrow the value.
        AppStart::Nothing => drop(tx),
        AppStart::Port(addr) => {
            tokio::spawn(async move {
                loop {
                    if tokio::net::TcpStream::connect(addr).await.is_ok() {
                        tx.send_replace(true);
                        tracing::info!(%addr, "app is listening");
                        // Kept until stopped, so that receivers never see the sender gone.
                        stop.cancelled().await;
                        return;
                    }
                    tokio::select! {
                        () = stop.cancelled() => return,
                        () = tokio::time::sleep(PORT_POLL) => {}
                    }
                }
            });
        }
        AppStart::Config(mut read) => {
            tokio::spawn(async move {
                loop {
                    if *read.borrow_and_update() {
                        tx.send_replace(true);
                        stop.cancelled().await;
                        return;
                    }
                    tokio::select! {
                        () = stop.cancelled() => return,
                        r = read.changed() => if r.is_err() { return },
                    }
                }
            });
        }
    }
    rx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn no_app_is_started_at_once() {
        let rx = app_started(AppStart::Nothing, CancellationToken::new());
        assert!(*rx.borrow());
    }

    #[tokio::test]
    async fn an_app_is_started_once_its_config_is_read() {
        let (tx, read) = watch::channel(false);
        let mut rx = app_started(AppStart::Config(read), CancellationToken::new());
        tokio::task::yield_now().await;
        assert!(!*rx.borrow_and_update());
        tx.send_replace(true);
        tokio::time::timeout(Duration::from_secs(5), rx.changed())
            .await
            .expect("started")
            .expect("sender alive");
        assert!(*rx.borrow());
        // Stays started when the config is read again later.
        tx.send_replace(false);
        tokio::task::yield_now().await;
        assert!(*rx.borrow());
    }

    #[tokio::test]
    async fn an_app_is_started_once_its_port_listens() {
        // A port nobody listens on yet: bind, note it, drop, listen again later.
        let probe = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = probe.local_addr().unwrap();
        drop(probe);
        let stop = CancellationToken::new();
        let mut rx = app_started(AppStart::Port(addr), stop.clone());
        tokio::time::sleep(PORT_POLL * 2).await;
        assert!(!*rx.borrow_and_update());
        let _listener = tokio::net::TcpListener::bind(addr).await.unwrap();
        tokio::time::timeout(Duration::from_secs(5), rx.changed())
            .await
            .expect("started")
            .expect("sender alive");
        assert!(*rx.borrow());
        stop.cancel();
    }
}
