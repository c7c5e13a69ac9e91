//! A real etcd for tests, from Debian's `etcd-server` (`/usr/bin/etcd`, or `$ETCD_BIN`).
//!
//! Every server is killed when its guard drops, and also when the test process dies however it
//! dies: etcd runs under a small shell that holds the read end of a pipe from us and kills etcd
//! as soon as that pipe closes.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use super::Etcd;
use crate::store::Store;
use crate::store::tables::Table;

/// How long a starting etcd may take to report healthy.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// One etcd process (single member) on free loopback ports, with its own data dir.
pub(crate) struct EtcdServer {
    /// The shell that runs etcd; `None` while stopped.
    child: Option<Child>,
    /// Our end of the pipe: closing it kills etcd.
    stdin: Option<ChildStdin>,
    /// Data dir and log; removed on drop.
    dir: TempDir,
    /// Client port.
    client_port: u16,
    /// Peer port.
    peer_port: u16,
}

impl EtcdServer {
    /// Starts a fresh etcd and waits until it is healthy.
    pub(crate) fn start() -> EtcdServer {
        let mut server = EtcdServer {
            child: None,
            stdin: None,
            dir: tempfile::tempdir().expect("tempdir"),
            client_port: free_port(),
            peer_port: free_port(),
        };
        server.spawn();
        server
    }

    /// `http://127.0.0.1:<port>`.
    pub(crate) fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.client_port)
    }

    /// `kill -9` etcd and wait until it is gone.
    pub(crate) fn kill(&mut self) {
        // EOF on the shell's stdin makes it `kill -9` etcd and wait for it.
        self.stdin.take();
        if let Some(mut child) = self.child.take() {
            let _ = child.wait();
        }
    }

    /// Whether etcd answers as healthy right now.
    pub(crate) fn is_up(&self) -> bool {
        health(self.client_port)
    }

    /// Starts etcd again on the same data dir and ports (killing it first if it runs).
    pub(crate) fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    fn log(&self) -> PathBuf {
        self.dir.path().join("etcd.log")
    }

    fn spawn(&mut self) {
        let bin = etcd_binary();
        let client = format!("http://127.0.0.1:{}", self.client_port);
        let peer = format!("http://127.0.0.1:{}", self.peer_port);
        let data = self.dir.path().join("data");
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(
                r#""$0" "$@" >>"$ETCD_TEST_LOG" 2>&1 & pid=$!; read line; kill -9 $pid; wait $pid"#,
            )
            .arg(&bin)
            .arg("--name=default")
            .arg(format!("--data-dir={}", data.display()))
            .arg(format!("--listen-client-urls={client}"))
            .arg(format!("--advertise-client-urls={client}"))
            .arg(format!("--listen-peer-urls={peer}"))
            .arg(format!("--initial-advertise-peer-urls={peer}"))
            .arg(format!("--initial-cluster=default={peer}"))
            .env("ETCD_TEST_LOG", self.log())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn sh for etcd");
        self.stdin = child.stdin.take();
        self.child = Some(child);
        self.wait_healthy();
    }

    /// Polls `/health` until etcd says it is healthy (it has a leader).
    fn wait_healthy(&mut self) {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if health(self.client_port) {
                return;
            }
            let exited = self
                .child
                .as_mut()
                .is_some_and(|c| c.try_wait().ok().flatten().is_some());
            if exited || Instant::now() > deadline {
                let log = std::fs::read_to_string(self.log()).unwrap_or_default();
                let tail: String = log.lines().rev().take(20).collect::<Vec<_>>().join("\n");
                panic!(
                    "etcd did not become healthy (exited: {exited}); last log lines, newest first:\n{tail}"
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for EtcdServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The etcd binary; panics with what to do when there is none.
fn etcd_binary() -> PathBuf {
    let bin = std::env::var_os("ETCD_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/etcd"));
    if Path::new(&bin).is_file() {
        return bin;
    }
    if std::env::var_os("CI").is_some() {
        panic!(
            "CI: etcd not found at {}: e2e/setup.sh must install Debian's etcd-server",
            bin.display()
        );
    }
    panic!(
        "etcd not found at {} (set ETCD_BIN to use another): run `bash e2e/setup.sh` to install it",
        bin.display()
    );
}

/// A port free on 127.0.0.1 right now.
fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

/// Whether etcd on `port` answers `/health` with `"health":"true"`.
fn health(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    if stream
        .write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut body = String::new();
    let _ = stream.read_to_string(&mut body);
    body.contains(r#""health":"true""#)
}

/// The etcd every suite test of this process shares (each in its own namespace). It is never
/// dropped; the pipe watchdog kills it when the process ends.
pub(crate) fn shared() -> &'static EtcdServer {
    static SHARED: OnceLock<EtcdServer> = OnceLock::new();
    SHARED.get_or_init(EtcdServer::start)
}

/// A namespace no other test of this process uses.
pub(crate) fn fresh_namespace() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("test{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// An `Etcd` store on the shared server in a fresh namespace, holding the raw records `raw`.
/// Must be called on a multi-thread tokio runtime (the store's tasks run on it).
pub(crate) fn shared_store(raw: &[(Table, &str, Vec<u8>)]) -> Arc<dyn Store> {
    let endpoint = shared().endpoint();
    let raw: Vec<(Table, String, Vec<u8>)> = raw
        .iter()
        .map(|(t, k, v)| (*t, (*k).to_owned(), v.clone()))
        .collect();
    tokio::task::block_in_place(|| {
        tokio::runtime::Handle::current().block_on(async move {
            let namespace = fresh_namespace();
            let client = super::client::Client::connect(&[&endpoint]).expect("connect");
            for (table, key, value) in raw {
                client
                    .put(
                        format!("{}{key}", super::keys::table_prefix(&namespace, table)),
                        value,
                    )
                    .await
                    .expect("plant");
            }
            let store = Etcd::connect(&[endpoint], &namespace)
                .await
                .expect("connect");
            Arc::new(store) as Arc<dyn Store>
        })
    })
}
