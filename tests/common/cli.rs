//! The real `jobsd` binary run as `jobsd jobs …` from a test: env and stdin given, output and
//! exit code taken (neither stdin nor stderr is a terminal, so no prompt and no progress bar).

use std::process::Stdio;

/// What one run of the binary did.
#[derive(Debug)]
pub struct CliOut {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl CliOut {
    /// Its stdout as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.stdout))
    }

    /// Asserts a successful run and gives its stdout.
    pub fn ok(&self) -> &str {
        assert_eq!(self.code, 0, "{self:?}");
        &self.stdout
    }
}

/// Runs `jobsd jobs <args>` with `env` (nothing else of ours leaks in: no token, no address)
/// and `input` on stdin, off the test's runtime (the servers it talks to run on it).
pub async fn jobs(args: &[&str], env: &[(&str, &str)], input: Vec<u8>) -> CliOut {
    let args: Vec<String> = std::iter::once("jobs")
        .chain(args.iter().copied())
        .map(str::to_owned)
        .collect();
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    tokio::task::spawn_blocking(move || {
        use std::io::Write;
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_jobsd"))
            .args(&args)
            .env_remove("DAPR_API_TOKEN")
            .env_remove("JOBSD_ADDRESS")
            .env_remove("NAMESPACE")
            .envs(env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(&input).unwrap();
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        CliOut {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    })
    .await
    .unwrap()
}
