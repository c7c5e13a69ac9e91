//! A sidecar on a manual clock over a given store, driven through its HTTP API.

use std::net::SocketAddr;
use std::sync::Arc;

use chrono::TimeDelta;
use jobsd::app::Sidecar;
use jobsd::clock::ManualClock;
use jobsd::config;
use jobsd::store::Store;
use serde_json::Value;

use super::{clockwork, http};

/// A running sidecar, its clock and its HTTP address.
pub struct Running {
    pub sidecar: Sidecar,
    pub clock: ManualClock,
    pub api: SocketAddr,
}

impl Running {
    pub async fn start(cfg: config::Sidecar, store: Arc<dyn Store>, clock: ManualClock) -> Running {
        let sidecar = Sidecar::start_with(cfg, store, Arc::new(clock.clone()))
            .await
            .unwrap();
        let api = sidecar.http_addrs[0];
        Running {
            sidecar,
            clock,
            api,
        }
    }

    pub async fn call(&self, method: &str, path: &str, body: &str) -> (u16, Value) {
        let r = http(self.api, method, path, &[], body.as_bytes()).await;
        let json = if r.body.is_empty() {
            Value::Null
        } else {
            r.json()
        };
        (r.status, json)
    }

    pub async fn create(&self, name: &str, body: &str) {
        let (status, json) = self
            .call("POST", &format!("/jobsd/v1/jobs/{name}"), body)
            .await;
        assert_eq!(status, 204, "{json}");
    }

    pub async fn view(&self, name: &str) -> Value {
        let (status, json) = self
            .call("GET", &format!("/jobsd/v1/jobs/{name}"), "")
            .await;
        assert_eq!(status, 200, "{json}");
        json
    }

    pub async fn runs(&self, name: &str, query: &str) -> Value {
        let (status, json) = self
            .call("GET", &format!("/jobsd/v1/jobs/{name}/runs{query}"), "")
            .await;
        assert_eq!(status, 200, "{json}");
        json
    }

    pub async fn run_for(&self, d: TimeDelta) {
        clockwork::run_for(self.sidecar.engine().unwrap(), &self.clock, d).await;
    }

    pub async fn stop(self) {
        self.sidecar.shutdown_token().cancel();
        self.sidecar.wait().await.unwrap();
    }
}
