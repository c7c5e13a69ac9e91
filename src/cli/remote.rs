//! `jobsd jobs list|get|delete --scheduler HOST:PORT --app-id A`: the jobs of app `A` read
//! and deleted through Dapr's `dapr.proto.scheduler.v1.Scheduler` service (`ListJobs`,
//! `GetJob`, `DeleteJob`), so the command line works against `jobsd scheduler` replicas and a
//! real Dapr Scheduler alike. The Scheduler keeps Dapr's job only: no labels, status or
//! history (those need a sidecar), and the JSON is Dapr's GET body.

use std::time::Duration;

use serde_json::Value;
use tonic::transport::{Channel, Endpoint};

use super::list::{ListArgs, Selector, Stream};
use super::output::{Column, Printer, or_dash, text_of};
use super::show::GetArgs;
use super::steer::{self, DeleteArgs, Deleter};
use super::{CliError, JobsCommand};
use crate::api::json::job_to_json;
use crate::api::scheduler_to_runtime_job;
use crate::proto::scheduler as sv1;
use crate::proto::scheduler::scheduler_client::SchedulerClient;

/// How long a connection to a replica may take to open.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Scheduler replicas and the app whose jobs are asked for.
#[derive(Debug, Clone)]
pub struct Target {
    /// `host:port` of each replica given; the first that answers is used.
    hosts: Vec<String>,
    /// The owner of the jobs.
    metadata: sv1::JobMetadata,
}

impl Target {
    /// Replicas `hosts` (comma-separated `host:port`), app `app_id` in `namespace`.
    pub fn new(hosts: &str, app_id: Option<&str>, namespace: &str) -> Result<Self, CliError> {
        let hosts = crate::config::parse_scheduler_addresses(hosts)
            .map_err(|e| CliError::Usage(format!("--scheduler: {e}")))?;
        if hosts.is_empty() {
            return Err(CliError::Usage("--scheduler: give host:port".to_owned()));
        }
        let Some(app_id) = app_id.filter(|a| !a.is_empty()) else {
            return Err(CliError::Usage(
                "--scheduler needs --app-id: the Scheduler keeps the jobs of every app".to_owned(),
            ));
        };
        Ok(Target {
            hosts,
            metadata: sv1::JobMetadata {
                app_id: app_id.to_owned(),
                namespace: namespace.to_owned(),
                target: Some(sv1::JobTargetMetadata {
                    r#type: Some(sv1::job_target_metadata::Type::Job(sv1::TargetJob {})),
                }),
                concurrency_key: None,
            },
        })
    }
}

/// A connected Scheduler client and the target's owner.
struct Session {
    /// The client of the replica that answered.
    client: SchedulerClient<Channel>,
    /// Its address, for messages.
    address: String,
    /// The owner of the jobs.
    metadata: sv1::JobMetadata,
    /// Longest one call may take.
    timeout: Duration,
}

impl Session {
    /// Connects to the first replica of `target` that answers.
    async fn open(target: &Target, timeout: Duration) -> Result<Self, CliError> {
        let mut reasons = Vec::new();
        for address in &target.hosts {
            let endpoint = Endpoint::from_shared(format!("http://{address}"))
                .map_err(|e| CliError::Usage(format!("--scheduler {address}: {e}")))?
                .connect_timeout(CONNECT_TIMEOUT.min(timeout))
                .timeout(timeout);
            match endpoint.connect().await {
                Ok(channel) => {
                    return Ok(Session {
                        client: SchedulerClient::new(channel).max_decoding_message_size(usize::MAX),
                        address: address.clone(),
                        metadata: target.metadata.clone(),
                        timeout,
                    });
                }
                Err(e) => reasons.push(format!("{address}: {}", innermost(&e))),
            }
        }
        Err(CliError::Unreachable {
            address: target.hosts.join(","),
            reason: reasons.join("; "),
        })
    }

    /// A failed call as the CLI reports it.
    fn error(&self, status: tonic::Status) -> CliError {
        match status.code() {
            tonic::Code::NotFound => CliError::NotFound(status.message().to_owned()),
            tonic::Code::Unavailable | tonic::Code::DeadlineExceeded => CliError::Unreachable {
                address: self.address.clone(),
                reason: status.message().to_owned(),
            },
            tonic::Code::Unauthenticated | tonic::Code::PermissionDenied => {
                CliError::Unauthorized {
                    address: self.address.clone(),
                    reason: status.message().to_owned(),
                }
            }
            code => CliError::Server {
                code: format!("{code:?}"),
                message: status.message().to_owned(),
            },
        }
    }

    /// Every job of the owner, by name.
    async fn list(&self) -> Result<Vec<sv1::NamedJob>, CliError> {
        let mut request = tonic::Request::new(sv1::ListJobsRequest {
            metadata: Some(self.metadata.clone()),
        });
        request.set_timeout(self.timeout);
        let mut jobs = self
            .client
            .clone()
            .list_jobs(request)
            .await
            .map_err(|s| self.error(s))?
            .into_inner()
            .jobs;
        jobs.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(jobs)
    }

    /// Job `name`.
    async fn get(&self, name: &str) -> Result<sv1::Job, CliError> {
        let mut request = tonic::Request::new(sv1::GetJobRequest {
            name: name.to_owned(),
            metadata: Some(self.metadata.clone()),
        });
        request.set_timeout(self.timeout);
        let answer = self
            .client
            .clone()
            .get_job(request)
            .await
            .map_err(|s| self.error(s))?;
        answer
            .into_inner()
            .job
            .ok_or_else(|| CliError::NotFound(format!("job {name} not found")))
    }
}

impl Deleter for Session {
    async fn check(&self, name: &str) -> Result<(), CliError> {
        self.get(name).await.map(|_| ())
    }

    async fn select(&self, selector: &Selector) -> Result<Vec<String>, CliError> {
        Ok(select(self.list().await?, selector)?
            .into_iter()
            .map(|j| j.name)
            .collect())
    }

    async fn delete_one(&self, name: &str) -> Result<(), CliError> {
        let mut request = tonic::Request::new(sv1::DeleteJobRequest {
            name: name.to_owned(),
            metadata: Some(self.metadata.clone()),
        });
        request.set_timeout(self.timeout);
        self.client
            .clone()
            .delete_job(request)
            .await
            .map(|_| ())
            .map_err(|s| self.error(s))
    }
}

/// The innermost cause of an error ("Connection refused").
fn innermost(e: &dyn std::error::Error) -> String {
    let mut cause = e;
    while let Some(inner) = cause.source() {
        cause = inner;
    }
    cause.to_string()
}

/// The jobs `selector` takes: a Scheduler has no labels, so only a prefix selects.
fn select(jobs: Vec<sv1::NamedJob>, selector: &Selector) -> Result<Vec<sv1::NamedJob>, CliError> {
    if !selector.labels.is_empty() {
        return Err(CliError::Usage(
            "--label needs a sidecar: a Dapr Scheduler keeps no labels".to_owned(),
        ));
    }
    let prefix = selector.prefix.as_deref().unwrap_or_default();
    Ok(jobs
        .into_iter()
        .filter(|j| j.name.starts_with(prefix))
        .collect())
}

/// A Scheduler job as Dapr's GET answers it.
fn job_json(name: &str, job: sv1::Job) -> Result<Value, CliError> {
    let job = scheduler_to_runtime_job(name.to_owned(), job);
    let text = job_to_json(&job).map_err(|e| CliError::Other(format!("job {name}: {e}")))?;
    serde_json::from_str(&text).map_err(|e| CliError::Other(format!("job {name}: {e}")))
}

/// The columns of a Scheduler job table, and the member of Dapr's GET body each shows.
const COLUMNS: &[(Column, &str)] = &[
    (("NAME", false), "/name"),
    (("SCHEDULE", false), "/schedule"),
    (("DUE TIME", false), "/dueTime"),
    (("REPEATS", false), "/repeats"),
    (("TTL", false), "/ttl"),
    (("FAILURE POLICY", true), "/failurePolicy"),
    (("DATA", true), "/data"),
];

/// `list`, `get` or `delete` through the Scheduler.
pub async fn run(
    target: &Target,
    command: &JobsCommand,
    out: &Printer,
    timeout: Duration,
) -> Result<(), CliError> {
    match command {
        JobsCommand::List(args) => list(target, args, out, timeout).await,
        JobsCommand::Get(args) => get(target, args, out, timeout).await,
        JobsCommand::Delete(args) => delete(target, args, out, timeout).await,
        _ => Err(CliError::Usage(
            "--scheduler serves list, get and delete; the other subcommands need a sidecar \
             (--address)"
                .to_owned(),
        )),
    }
}

async fn list(
    target: &Target,
    args: &ListArgs,
    out: &Printer,
    timeout: Duration,
) -> Result<(), CliError> {
    if args.state.is_some() {
        return Err(CliError::Usage(
            "--state needs a sidecar: a Dapr Scheduler keeps no status".to_owned(),
        ));
    }
    let session = Session::open(target, timeout).await?;
    let mut jobs = select(session.list().await?, &args.selector)?;
    if let Some(limit) = args.limit {
        jobs.truncate(limit);
    }
    let items = jobs
        .into_iter()
        .map(|j| job_json(&j.name, j.job.unwrap_or_default()))
        .collect::<Result<Vec<_>, _>>()?;
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|job| {
            COLUMNS
                .iter()
                .map(|(_, member)| or_dash(text_of(job, member)))
                .collect()
        })
        .collect();
    let columns: Vec<Column> = COLUMNS.iter().map(|(column, _)| *column).collect();
    let mut stream = Stream::new(out, &columns);
    stream.push(&items, &rows)?;
    stream.finish()
}

async fn get(
    target: &Target,
    args: &GetArgs,
    out: &Printer,
    timeout: Duration,
) -> Result<(), CliError> {
    let session = Session::open(target, timeout).await?;
    let job = job_json(&args.name, session.get(&args.name).await?)?;
    if !out.is_table() {
        return out.document(&job);
    }
    let pairs: Vec<(&str, String)> = [
        ("Name", "/name"),
        ("Schedule", "/schedule"),
        ("Due time", "/dueTime"),
        ("Repeats", "/repeats"),
        ("TTL", "/ttl"),
        ("Data", "/data"),
        ("Failure policy", "/failurePolicy"),
    ]
    .iter()
    .map(|(k, p)| (*k, or_dash(text_of(&job, p))))
    .collect();
    super::output::print(&super::output::fields(&pairs))
}

async fn delete(
    target: &Target,
    args: &DeleteArgs,
    out: &Printer,
    timeout: Duration,
) -> Result<(), CliError> {
    let session = Session::open(target, timeout).await?;
    steer::delete(&session, args, out).await
}
