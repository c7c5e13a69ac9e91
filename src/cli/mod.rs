//! `jobsd jobs …`: the command line that looks at and steers the jobs of a running sidecar
//! (its `/jobsd/v1` HTTP routes) or of Scheduler replicas (Dapr's `Scheduler` gRPC service),
//! and previews a job offline.
//!
//! One subcommand per file below; [`JobsCommand`] is the list of them. What each prints:
//! aligned tables by default, `-o wide` for more columns, `-o json|yaml` for the server's own
//! bodies. Errors go to stderr, and the process exits with one of the [`exit`] codes, so a
//! shell script can tell "not found" from "cannot connect" from "the server said no".
//!
//! The web console's files and their routes are here too ([`console`]): what people use to
//! operate jobsd.

mod backup;
mod client;
pub mod console;
mod create;
mod error;
mod limits;
mod list;
mod output;
mod preview;
mod remote;
mod show;
mod steer;

use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};

pub use error::{CliError, exit};

/// `jobsd jobs`: the options every subcommand takes, and the subcommand.
#[derive(Debug, Clone, Args)]
pub struct JobsArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: JobsCommand,
    /// Where the sidecar serves its HTTP API (`DAPR_API_TOKEN`, when set, is sent as
    /// `dapr-api-token`).
    #[arg(
        long,
        global = true,
        env = "JOBSD_ADDRESS",
        default_value = "http://127.0.0.1:3500"
    )]
    pub address: String,
    /// Talk to Dapr Scheduler replicas (`host:port`, comma-separated) over gRPC instead of a
    /// sidecar: `list`, `get` and `delete` of app `--app-id`'s jobs.
    #[arg(long, global = true, value_name = "HOST:PORT")]
    pub scheduler: Option<String>,
    /// TLS to the replicas of `--scheduler` (the sidecar's flags; give them before the
    /// subcommand).
    #[command(flatten)]
    pub scheduler_tls: crate::tls::flags::SchedulerTlsArgs,
    /// The app whose jobs `--scheduler` reads (a sidecar knows its own app).
    #[arg(long, global = true)]
    pub app_id: Option<String>,
    /// The namespace of `--app-id` with `--scheduler`.
    #[arg(long, global = true, env = "NAMESPACE", default_value = "default")]
    pub namespace: String,
    /// Output format.
    #[arg(short, long, global = true, value_enum, default_value_t = Output::Table)]
    pub output: Output,
    /// How long one request may take before the command gives up (a Go duration).
    #[arg(long, global = true, default_value = "30s", value_parser = go_duration)]
    pub timeout: Duration,
}

/// How results are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// Aligned columns for people.
    Table,
    /// The table with more columns (absolute times, counters).
    Wide,
    /// The server's JSON (lists: one array, streamed).
    Json,
    /// The same as YAML.
    Yaml,
}

/// The subcommands of `jobsd jobs`.
#[derive(Debug, Clone, Subcommand)]
pub enum JobsCommand {
    /// List jobs (every page, printed as they arrive).
    List(list::ListArgs),
    /// Show one job: its Dapr fields, policies, labels and status.
    Get(show::GetArgs),
    /// Show a job's run history, newest first.
    Runs(show::RunsArgs),
    /// Create many jobs from a file of one JSON job per line, in batches.
    Create(create::CreateArgs),
    /// Delete a job, or every job a prefix or labels select.
    Delete(steer::DeleteArgs),
    /// Pause a job, or every job a prefix or labels select: no tick fires until resumed.
    Pause(steer::PauseArgs),
    /// Resume a paused job, or every paused job a prefix or labels select.
    Resume(steer::SelectArgs),
    /// Run a job once now (its schedule and progress do not move).
    Trigger(steer::TriggerArgs),
    /// Run every tick of a job's schedule in a past range, in order.
    Backfill(steer::BackfillArgs),
    /// Show the next fire times of a job before creating it; needs no server.
    Preview(preview::PreviewArgs),
    /// Write every job with its progress to a file (NDJSON, docs/export-format.md).
    Export(backup::ExportArgs),
    /// Restore jobs from an export (or a `dapr scheduler export` file).
    Import(backup::ImportArgs),
    /// Concurrency limits by key (`policy.concurrencyKey`): list, set, delete.
    Limits(limits::LimitsArgs),
}

/// A Go duration flag (`30s`, `1m30s`) as a [`Duration`].
fn go_duration(text: &str) -> Result<Duration, String> {
    let nanos = crate::schedule::duration::parse(text).map_err(|e| e.to_string())?;
    u64::try_from(nanos)
        .ok()
        .filter(|&n| n > 0)
        .map(Duration::from_nanos)
        .ok_or_else(|| format!("{text:?} is not a positive duration"))
}

/// Runs `jobsd jobs …` to the end and gives the process exit code; what it prints goes to
/// stdout, errors to stderr.
pub fn run(args: JobsArgs) -> u8 {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("jobsd: cannot start the runtime: {e}");
            return exit::ERROR;
        }
    };
    match runtime.block_on(dispatch(args)) {
        Ok(()) | Err(CliError::OutputClosed) => exit::OK,
        Err(e) => {
            eprintln!("jobsd: {e}");
            e.exit_code()
        }
    }
}

async fn dispatch(args: JobsArgs) -> Result<(), CliError> {
    let out = output::Printer::new(args.output);
    let sidecar = || client::Client::new(&args.address, api_token(), args.timeout);
    match &args.command {
        // Offline: no connection is made, whatever the address.
        JobsCommand::Preview(preview) => {
            let owner = preview::Owner {
                app_id: args.app_id.clone().unwrap_or_else(|| "app".to_owned()),
                namespace: args.namespace.clone(),
            };
            preview::run(preview, &owner, &out).await
        }
        command if args.scheduler.is_some() => {
            let hosts = args.scheduler.as_deref().unwrap_or_default();
            let tls = args
                .scheduler_tls
                .validate("--scheduler", true)
                .map_err(|e| CliError::Usage(e.to_string()))?;
            let target = remote::Target::new(hosts, args.app_id.as_deref(), &args.namespace, tls)?;
            remote::run(&target, command, &out, args.timeout).await
        }
        JobsCommand::List(list) => list::run(&sidecar()?, list, &out).await,
        JobsCommand::Get(get) => show::get(&sidecar()?, get, &out).await,
        JobsCommand::Runs(runs) => show::runs(&sidecar()?, runs, &out).await,
        JobsCommand::Create(create) => create::create(&sidecar()?, create, &out).await,
        JobsCommand::Delete(delete) => steer::delete(&sidecar()?, delete, &out).await,
        JobsCommand::Pause(pause) => steer::pause(&sidecar()?, pause, &out).await,
        JobsCommand::Resume(resume) => steer::resume(&sidecar()?, resume, &out).await,
        JobsCommand::Trigger(trigger) => steer::trigger(&sidecar()?, trigger, &out).await,
        JobsCommand::Backfill(backfill) => steer::backfill(&sidecar()?, backfill, &out).await,
        JobsCommand::Export(export) => backup::export(&sidecar()?, export, &out).await,
        JobsCommand::Import(import) => backup::import(&sidecar()?, import, &out).await,
        JobsCommand::Limits(limits) => limits::run(&sidecar()?, limits, &out).await,
    }
}

/// `DAPR_API_TOKEN`, as daprd reads it: empty means none.
fn api_token() -> Option<String> {
    std::env::var("DAPR_API_TOKEN")
        .ok()
        .filter(|t| !t.is_empty())
}
