//! `jobsd jobs list|get|delete --scheduler HOST:PORT --app-id A`: the jobs of app `A` on
//! Scheduler replicas. `jobsd scheduler` replicas answer `list` and `get` from jobsd's views
//! beside the Scheduler service (`jobsd.scheduler.v1.Jobs`: labels, status, the list's
//! filters and pages), so the output is the sidecar's. A real Dapr Scheduler answers those
//! `Unimplemented`; then Dapr's `dapr.proto.scheduler.v1.Scheduler` (`ListJobs`, `GetJob`)
//! gives Dapr's job only — no labels, status or history — and the JSON is Dapr's GET body.
//! Deletes always go through Dapr's `DeleteJob`, which both serve.

use std::time::Duration;

use chrono::Utc;
use clap::ValueEnum;
use serde_json::Value;
use tonic::transport::{Channel, Endpoint};

use super::list::{JOB_COLUMNS, ListArgs, Selector, Stream, job_row};
use super::output::{Column, Printer, or_dash, print, text_of};
use super::show::{GetArgs, describe};
use super::steer::{self, DeleteArgs, Deleter};
use super::{CliError, JobsCommand};
use crate::api::jobsd::json::view as view_json;
use crate::api::json::view_job_to_json;
use crate::api::scheduler_to_runtime_job;
use crate::proto::dapr_scheduler as sv1;
use crate::proto::dapr_scheduler::scheduler_client::SchedulerClient;
use crate::proto::jobsd_replica::{self as jsv1, jobs_client::JobsClient};
use crate::seam::views_wire::{filter_to_wire, view_from_wire};
use crate::seam::{JobState, JobView, ListFilter};

/// How long a connection to a replica may take to open.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Scheduler replicas and the app whose jobs are asked for.
#[derive(Debug, Clone)]
pub struct Target {
    /// `host:port` of each replica given; the first that answers is used.
    hosts: Vec<String>,
    /// The owner of the jobs.
    metadata: sv1::JobMetadata,
    /// TLS to the replicas (`--scheduler-tls-*`).
    tls: Option<crate::tls::ClientTls>,
}

impl Target {
    /// Replicas `hosts` (comma-separated `host:port`), app `app_id` in `namespace`, over `tls`
    /// if given.
    pub fn new(
        hosts: &str,
        app_id: Option<&str>,
        namespace: &str,
        tls: Option<crate::tls::ClientTls>,
    ) -> Result<Self, CliError> {
        let hosts = crate::seam::remote::parse_addresses(hosts)
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
            tls,
        })
    }
}

/// A connected Scheduler client and the target's owner.
struct Session {
    /// The client of the replica that answered.
    client: SchedulerClient<Channel>,
    /// jobsd's views on the same replica (`Unimplemented` on a Dapr Scheduler).
    views: JobsClient<Channel>,
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
            let usage =
                |e: tonic::transport::Error| CliError::Usage(format!("--scheduler {address}: {e}"));
            let scheme = if target.tls.is_some() {
                "https"
            } else {
                "http"
            };
            let mut endpoint = Endpoint::from_shared(format!("{scheme}://{address}"))
                .map_err(usage)?
                .connect_timeout(CONNECT_TIMEOUT.min(timeout))
                .timeout(timeout);
            if let Some(tls) = &target.tls {
                endpoint = endpoint.tls_config(tls.tonic()).map_err(usage)?;
            }
            match endpoint.connect().await {
                Ok(channel) => {
                    return Ok(Session {
                        views: JobsClient::new(channel.clone())
                            .max_decoding_message_size(usize::MAX),
                        client: SchedulerClient::new(channel).max_decoding_message_size(usize::MAX),
                        address: address.clone(),
                        metadata: target.metadata.clone(),
                        timeout,
                    });
                }
                Err(e) => reasons.push(format!("{address}: {}", crate::tls::innermost(&e))),
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

impl Session {
    /// One page of jobsd's views; `None` from a Dapr Scheduler, which has none.
    async fn view_page(
        &self,
        filter: ListFilter,
    ) -> Result<Option<jsv1::ListJobsResponse>, CliError> {
        let mut request = tonic::Request::new(jsv1::ListJobsRequest {
            metadata: Some(self.metadata.clone()),
            filter: Some(filter_to_wire(filter)),
        });
        request.set_timeout(self.timeout);
        match self.views.clone().list_jobs(request).await {
            Ok(page) => Ok(Some(page.into_inner())),
            Err(status) if status.code() == tonic::Code::Unimplemented => Ok(None),
            Err(status) => Err(self.error(status)),
        }
    }

    /// jobsd's view of job `name`; `None` from a Dapr Scheduler.
    async fn view(&self, name: &str) -> Result<Option<JobView>, CliError> {
        let mut request = tonic::Request::new(jsv1::GetJobRequest {
            metadata: Some(self.metadata.clone()),
            name: name.to_owned(),
        });
        request.set_timeout(self.timeout);
        match self.views.clone().get_job(request).await {
            Ok(view) => Ok(Some(view_from_wire(view.into_inner()))),
            Err(status) if status.code() == tonic::Code::Unimplemented => Ok(None),
            Err(status) => Err(self.error(status)),
        }
    }
}

/// The views' filter of what `selector` takes (a page of the most the views answer).
fn filter_of(selector: &Selector) -> ListFilter {
    ListFilter {
        name_prefix: selector.prefix.clone().unwrap_or_default(),
        labels: selector
            .labels
            .iter()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
        state: None,
        page_size: crate::engine::MAX_PAGE_SIZE,
        page_token: None,
    }
}

/// A view as jobsd's GET answers it.
fn view_value(view: &JobView) -> Result<Value, CliError> {
    let text = view_json(view).map_err(|e| CliError::Other(format!("job {}: {e}", view.name)))?;
    serde_json::from_str(&text).map_err(|e| CliError::Other(format!("job {}: {e}", view.name)))
}

impl Deleter for Session {
    async fn check(&self, name: &str) -> Result<(), CliError> {
        self.get(name).await.map(|_| ())
    }

    async fn select(&self, selector: &Selector) -> Result<Vec<String>, CliError> {
        // jobsd's views select by labels too; a Dapr Scheduler's list by prefix only.
        let mut filter = filter_of(selector);
        let mut names = Vec::new();
        while let Some(page) = self.view_page(filter.clone()).await? {
            names.extend(page.jobs.into_iter().map(|v| v.name));
            if page.next_page_token.is_empty() {
                return Ok(names);
            }
            filter.page_token = Some(page.next_page_token);
        }
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

/// The jobs `selector` takes: a Scheduler has no labels, so only a prefix selects.
fn select(jobs: Vec<sv1::NamedJob>, selector: &Selector) -> Result<Vec<sv1::NamedJob>, CliError> {
    if !selector.labels.is_empty() {
        return Err(CliError::Usage(
            "--label needs jobsd's scheduler or a sidecar: a Dapr Scheduler keeps no labels"
                .to_owned(),
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
    let text = view_job_to_json(&job).map_err(|e| CliError::Other(format!("job {name}: {e}")))?;
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
    let session = Session::open(target, timeout).await?;
    let mut filter = filter_of(&args.selector);
    filter.state = args
        .state
        .and_then(|s| s.to_possible_value())
        .and_then(|v| JobState::parse(v.get_name()));
    filter.page_size = args.page_size.min(args.limit.unwrap_or(usize::MAX)).max(1);
    let Some(mut page) = session.view_page(filter.clone()).await? else {
        return dapr_list(&session, args, out).await;
    };
    // A replica's clock is not ours to read: relative times are from this machine's.
    let now = Utc::now();
    let mut stream = Stream::new(out, JOB_COLUMNS);
    let mut left = args.limit.unwrap_or(usize::MAX);
    loop {
        let mut items = page
            .jobs
            .into_iter()
            .map(|v| view_value(&view_from_wire(v)))
            .collect::<Result<Vec<_>, _>>()?;
        items.truncate(left);
        left -= items.len();
        let rows: Vec<Vec<String>> = items.iter().map(|v| job_row(v, now)).collect();
        stream.push(&items, &rows)?;
        let token = Some(page.next_page_token).filter(|t| !t.is_empty());
        let (Some(token), true) = (token, left > 0) else {
            break;
        };
        filter.page_token = Some(token);
        page = session.view_page(filter.clone()).await?.ok_or_else(|| {
            CliError::Other("the replica stopped serving jobsd's views".to_owned())
        })?;
    }
    stream.finish()
}

/// `list` through Dapr's `ListJobs`: Dapr's fields only, a prefix filter at most.
async fn dapr_list(session: &Session, args: &ListArgs, out: &Printer) -> Result<(), CliError> {
    if args.state.is_some() {
        return Err(CliError::Usage(
            "--state needs jobsd's scheduler or a sidecar: a Dapr Scheduler keeps no status"
                .to_owned(),
        ));
    }
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
    if let Some(view) = session.view(&args.name).await? {
        let view = view_value(&view)?;
        if !out.is_table() {
            return out.document(&view);
        }
        return print(&describe(&view, Utc::now()));
    }
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
    print(&super::output::fields(&pairs))
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
