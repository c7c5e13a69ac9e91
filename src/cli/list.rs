//! `jobsd jobs list`: `GET /jobsd/v1/jobs` with its filters, every page fetched in turn (the
//! `nextPageToken` stays behind the scenes) and printed as it arrives.

use chrono::{DateTime, Utc};
use clap::{Args, ValueEnum};
use serde_json::Value;

use super::client::{self, Client};
use super::output::{
    self, Column, Printer, Table, absolute_or_dash, or_dash, relative_or_dash, str_of, text_of,
    time_of,
};
use super::{CliError, Output};

/// Jobs asked for per page.
const PAGE_SIZE: usize = 500;

/// Which jobs a list (or a delete, pause or resume of many) takes.
#[derive(Debug, Clone, Default, Args)]
pub struct Selector {
    /// Only jobs whose name starts with this.
    #[arg(long)]
    pub prefix: Option<String>,
    /// Only jobs with this label (`key=value`); repeat for several (all must match).
    #[arg(long = "label", short = 'l', value_name = "KEY=VALUE", value_parser = label)]
    pub labels: Vec<String>,
}

impl Selector {
    /// Whether it selects anything narrower than every job.
    pub fn is_given(&self) -> bool {
        self.prefix.is_some() || !self.labels.is_empty()
    }

    /// The list route's query pairs.
    pub fn pairs(&self) -> Vec<(&'static str, String)> {
        let mut pairs = Vec::new();
        if let Some(prefix) = &self.prefix {
            pairs.push(("prefix", prefix.clone()));
        }
        for label in &self.labels {
            pairs.push(("label", label.clone()));
        }
        pairs
    }
}

/// A `key=value` label selector.
fn label(text: &str) -> Result<String, String> {
    match text.split_once('=') {
        Some((k, _)) if !k.is_empty() => Ok(text.to_owned()),
        _ => Err(format!("{text:?} is not key=value")),
    }
}

/// A job's state, as the list route filters it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum State {
    /// Scheduled and not paused.
    Active,
    /// Paused.
    Paused,
    /// Done (kept for `--finished-retention`).
    Finished,
}

/// `jobsd jobs list`.
#[derive(Debug, Clone, Args)]
pub struct ListArgs {
    /// Which jobs.
    #[command(flatten)]
    pub selector: Selector,
    /// Only jobs in this state.
    #[arg(long, value_enum)]
    pub state: Option<State>,
    /// Stop after this many jobs.
    #[arg(long)]
    pub limit: Option<usize>,
    /// Jobs fetched per request.
    #[arg(long, default_value_t = PAGE_SIZE)]
    pub page_size: usize,
}

/// The pages of one list, fetched one at a time.
pub struct Pages<'a> {
    /// The sidecar.
    client: &'a Client,
    /// The filter's query pairs.
    pairs: Vec<(&'static str, String)>,
    /// The token of the next page; `None` once the last page was fetched.
    next: Option<String>,
}

impl<'a> Pages<'a> {
    /// The pages of the jobs `pairs` select (the list route's query), `page_size` at a time.
    pub fn new(client: &'a Client, mut pairs: Vec<(&'static str, String)>, size: usize) -> Self {
        pairs.push(("pageSize", size.to_string()));
        Pages {
            client,
            pairs,
            next: Some(String::new()),
        }
    }

    /// The next page's jobs; `None` after the last.
    pub async fn next(&mut self) -> Result<Option<Vec<Value>>, CliError> {
        let Some(token) = self.next.take() else {
            return Ok(None);
        };
        let mut pairs = self.pairs.clone();
        if !token.is_empty() {
            pairs.push(("pageToken", token));
        }
        let path = format!("/jobsd/v1/jobs{}", client::query(pairs));
        let page = self.client.get(&path).await?;
        self.next = page
            .get("nextPageToken")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
            .map(str::to_owned);
        match page.get("jobs") {
            Some(Value::Array(jobs)) => Ok(Some(jobs.clone())),
            _ => Err(CliError::Other(
                "the list answer has no \"jobs\" array".to_owned(),
            )),
        }
    }
}

/// The names of every job `selector` takes.
pub async fn names(client: &Client, selector: &Selector) -> Result<Vec<String>, CliError> {
    let mut pages = Pages::new(client, selector.pairs(), PAGE_SIZE);
    let mut names = Vec::new();
    while let Some(jobs) = pages.next().await? {
        names.extend(jobs.iter().map(|j| str_of(j, "/name").to_owned()));
    }
    Ok(names)
}

/// `jobsd jobs list`.
pub async fn run(client: &Client, args: &ListArgs, out: &Printer) -> Result<(), CliError> {
    let mut pairs = args.selector.pairs();
    if let Some(name) = args.state.and_then(|s| s.to_possible_value()) {
        pairs.push(("state", name.get_name().to_owned()));
    }
    let now = if out.is_table() {
        client.now().await?
    } else {
        Utc::now()
    };
    let page_size = match args.limit {
        Some(limit) => args.page_size.min(limit.max(1)),
        None => args.page_size,
    };
    let mut pages = Pages::new(client, pairs, page_size.max(1));
    let mut stream = Stream::new(out, JOB_COLUMNS);
    let mut left = args.limit.unwrap_or(usize::MAX);
    while left > 0 {
        let Some(mut jobs) = pages.next().await? else {
            break;
        };
        jobs.truncate(left);
        left -= jobs.len();
        let rows: Vec<Vec<String>> = jobs.iter().map(|j| job_row(j, now)).collect();
        stream.push(&jobs, &rows)?;
    }
    stream.finish()
}

/// Table rows held back so that a list of up to this many is aligned as one table; past it
/// rows go out page by page (a wider page widens the columns from there on).
const ALIGNED_ROWS: usize = 1000;

/// Items printed as they arrive: the elements of one JSON array or YAML sequence at once,
/// table rows once [`ALIGNED_ROWS`] are in (or at the end).
pub struct Stream<'a> {
    /// The format.
    out: &'a Printer,
    /// The table, for table formats.
    table: Table,
    /// Table rows not printed yet.
    pending: Vec<Vec<String>>,
    /// Items printed so far.
    count: usize,
}

impl<'a> Stream<'a> {
    /// A stream printing table rows with a cell for each of `columns`.
    pub fn new(out: &'a Printer, columns: &[Column]) -> Self {
        Stream {
            out,
            table: Table::of(columns, out.is_wide()),
            pending: Vec::new(),
            count: 0,
        }
    }

    /// Prints a batch: `items` as JSON/YAML, or their table `rows`.
    pub fn push(&mut self, items: &[Value], rows: &[Vec<String>]) -> Result<(), CliError> {
        match self.out.format {
            Output::Table | Output::Wide => {
                self.pending.extend_from_slice(rows);
                if self.pending.len() >= ALIGNED_ROWS {
                    self.table.print(&std::mem::take(&mut self.pending))?;
                }
            }
            Output::Json => {
                let mut text = String::new();
                for item in items {
                    text.push_str(if self.count == 0 { "[\n" } else { ",\n" });
                    self.count += 1;
                    for (i, line) in output::pretty(item)?.lines().enumerate() {
                        if i > 0 {
                            text.push('\n');
                        }
                        text.push_str("  ");
                        text.push_str(line);
                    }
                }
                output::print(&text)?;
            }
            Output::Yaml => {
                if !items.is_empty() {
                    self.count += items.len();
                    output::print(&output::yaml(&Value::Array(items.to_vec()))?)?;
                }
            }
        }
        Ok(())
    }

    /// Closes the array (or prints an empty one, or the bare header).
    pub fn finish(mut self) -> Result<(), CliError> {
        match (self.out.format, self.count) {
            (Output::Table | Output::Wide, _) if !self.pending.is_empty() => {
                self.table.print(&self.pending)
            }
            (Output::Table | Output::Wide, _) => self.table.finish(),
            (Output::Json, 0) => output::print("[]\n"),
            (Output::Json, _) => output::print("\n]\n"),
            (Output::Yaml, 0) => output::print("[]\n"),
            (Output::Yaml, _) => Ok(()),
        }
    }
}

/// The columns of a job table.
pub const JOB_COLUMNS: &[Column] = &[
    ("NAME", false),
    ("STATE", false),
    ("SCHEDULE", false),
    ("NEXT FIRE", false),
    ("NEXT FIRE (UTC)", true),
    ("LAST FIRE", false),
    ("LAST FIRE (UTC)", true),
    ("OUTCOME", false),
    ("DELIVERED", true),
    ("SUCCEEDED", true),
    ("FAILED", true),
    ("TICKS", true),
    ("REPEATS", true),
    ("LABELS", false),
    ("NOTE", true),
];

/// How a job is scheduled, in one cell: its schedule, else `at <dueTime>`.
pub fn schedule_cell(job: &Value) -> String {
    let schedule = str_of(job, "/schedule");
    let due = str_of(job, "/dueTime");
    match (schedule.is_empty(), due.is_empty()) {
        (false, true) => schedule.to_owned(),
        (false, false) => format!("{schedule} from {due}"),
        (true, false) => format!("at {due}"),
        (true, true) => "-".to_owned(),
    }
}

/// A job's labels as `k=v,k=v`.
pub fn labels_cell(view: &Value) -> String {
    match view.get("labels") {
        Some(Value::Object(labels)) => labels
            .iter()
            .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
            .collect::<Vec<_>>()
            .join(","),
        _ => String::new(),
    }
}

/// One job view (`GET /jobsd/v1/jobs/{name}`'s body) as a row of [`JOB_COLUMNS`].
pub fn job_row(view: &Value, now: DateTime<Utc>) -> Vec<String> {
    let job = view.get("job").unwrap_or(&Value::Null);
    let next = time_of(view, "/status/nextFireTime");
    let last = time_of(view, "/status/lastFireTime/actual");
    let note = match text_of(view, "/status/pausedNote") {
        note if note.is_empty() => text_of(view, "/status/lastError"),
        note => note,
    };
    vec![
        str_of(view, "/name").to_owned(),
        or_dash(str_of(view, "/status/state").to_owned()),
        schedule_cell(job),
        relative_or_dash(next, now),
        absolute_or_dash(next),
        relative_or_dash(last, now),
        absolute_or_dash(last),
        or_dash(text_of(view, "/status/lastOutcome")),
        text_of(view, "/status/counters/delivered"),
        text_of(view, "/status/counters/succeeded"),
        text_of(view, "/status/counters/failedAttempts"),
        text_of(view, "/status/ticks"),
        or_dash(text_of(job, "/repeats")),
        or_dash(labels_cell(view)),
        or_dash(note),
    ]
}
