//! The subcommands that change jobs: `delete` (by name, or many by prefix and labels, with a
//! confirmation), `pause` / `resume` (by name, or many through the bulk `jobs:pause` /
//! `jobs:resume` routes), `trigger` and `backfill`.

use std::io::{BufRead, IsTerminal, Write};

use clap::{Args, ValueEnum};
use futures_util::StreamExt;
use http::Method;
use serde_json::{Value, json};

use super::CliError;
use super::client::{self, Client};
use super::list::{self, Selector};
use super::output::{Printer, Table, absolute_or_dash, str_of, time_of};

/// Deletes in flight at once in a delete of many.
const DELETES_AT_ONCE: usize = 8;
/// Names a confirmation prompt shows before "…".
const NAMES_SHOWN: usize = 10;

/// A job by name, or many by prefix and labels.
#[derive(Debug, Clone, Args)]
pub struct SelectArgs {
    /// The job's name (or give --prefix / --label for many).
    #[arg(conflicts_with_all = ["prefix", "labels", "all"])]
    pub name: Option<String>,
    /// Which jobs, when no name is given.
    #[command(flatten)]
    pub selector: Selector,
    /// Every job of the app (when neither a name, a prefix nor a label is given).
    #[arg(long)]
    pub all: bool,
}

/// `jobsd jobs pause`.
#[derive(Debug, Clone, Args)]
pub struct PauseArgs {
    /// Which jobs.
    #[command(flatten)]
    pub select: SelectArgs,
    /// Why, shown in the job's status.
    #[arg(long)]
    pub note: Option<String>,
}

/// `jobsd jobs delete`.
#[derive(Debug, Clone, Args)]
pub struct DeleteArgs {
    /// The job's name (or give --prefix / --label for many).
    #[arg(conflicts_with_all = ["prefix", "labels"])]
    pub name: Option<String>,
    /// Which jobs, when no name is given.
    #[command(flatten)]
    pub selector: Selector,
    /// Do not ask for confirmation (needed to delete many jobs without a terminal).
    #[arg(long, short = 'y')]
    pub yes: bool,
}

/// How a run by hand goes beside the job's scheduled executions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Overlap {
    /// Take turns with them.
    Serial,
    /// Refuse while one is in flight.
    Skip,
    /// Take turns, at most one waiting.
    #[value(name = "bufferOne")]
    BufferOne,
    /// Run beside them.
    Allow,
}

impl Overlap {
    fn wire(self) -> &'static str {
        match self {
            Overlap::Serial => "serial",
            Overlap::Skip => "skip",
            Overlap::BufferOne => "bufferOne",
            Overlap::Allow => "allow",
        }
    }
}

/// `jobsd jobs trigger`.
#[derive(Debug, Clone, Args)]
pub struct TriggerArgs {
    /// The job's name.
    pub name: String,
    /// Overrides the job's `policy.overlap` for this run.
    #[arg(long, value_enum)]
    pub overlap: Option<Overlap>,
}

/// `jobsd jobs backfill`.
#[derive(Debug, Clone, Args)]
pub struct BackfillArgs {
    /// The job's name.
    pub name: String,
    /// First instant of the range (RFC 3339, included).
    #[arg(long)]
    pub start: String,
    /// End of the range (RFC 3339, excluded).
    #[arg(long)]
    pub end: String,
    /// Overrides the job's `policy.overlap` for these runs.
    #[arg(long, value_enum)]
    pub overlap: Option<Overlap>,
}

/// Where a delete goes: a sidecar's routes, or Scheduler replicas (`--scheduler`).
pub(super) trait Deleter {
    /// Nothing when job `name` exists; [`CliError::NotFound`] when it does not.
    async fn check(&self, name: &str) -> Result<(), CliError>;
    /// The names of the jobs `selector` takes.
    async fn select(&self, selector: &Selector) -> Result<Vec<String>, CliError>;
    /// Deletes job `name`.
    async fn delete_one(&self, name: &str) -> Result<(), CliError>;
}

impl Deleter for Client {
    async fn check(&self, name: &str) -> Result<(), CliError> {
        self.get(&client::job_path(name, "")).await.map(|_| ())
    }

    async fn select(&self, selector: &Selector) -> Result<Vec<String>, CliError> {
        list::names(self, selector).await
    }

    async fn delete_one(&self, name: &str) -> Result<(), CliError> {
        self.call(Method::DELETE, &client::job_path(name, ""), None)
            .await
            .map(|_| ())
    }
}

/// `jobsd jobs delete`.
pub async fn delete(
    target: &impl Deleter,
    args: &DeleteArgs,
    out: &Printer,
) -> Result<(), CliError> {
    let names = match &args.name {
        Some(name) => {
            // Look first: a name that does not exist is "not found" (exit 3), not the silent
            // success Dapr's delete answers.
            target.check(name).await?;
            vec![name.clone()]
        }
        None if args.selector.is_given() => target.select(&args.selector).await?,
        None => {
            return Err(CliError::Usage(
                "give a job name, or --prefix / --label to select jobs".to_owned(),
            ));
        }
    };
    if names.is_empty() {
        eprintln!("jobsd: no job matches; nothing deleted");
        return report_deleted(out, &[], &[]);
    }
    if !args.yes {
        confirm(&names, args.name.is_none())?;
    }
    let results: Vec<(String, Result<(), CliError>)> = futures_util::stream::iter(names)
        .map(|name| async move {
            let result = target.delete_one(&name).await;
            (name, result)
        })
        .buffered(DELETES_AT_ONCE)
        .collect()
        .await;
    let mut deleted = Vec::new();
    let mut failed = Vec::new();
    for (name, result) in results {
        match result {
            Ok(()) => deleted.push(name),
            // Nothing more will work: say so once rather than for every job.
            Err(e @ (CliError::Unreachable { .. } | CliError::Unauthorized { .. }))
                if deleted.is_empty() =>
            {
                return Err(e);
            }
            Err(e) => failed.push((name, e)),
        }
    }
    report_deleted(out, &deleted, &failed)?;
    if deleted.is_empty() && !failed.is_empty() {
        // Nothing deleted: the first failure is the answer (and its exit code).
        for (name, e) in failed.iter().skip(1) {
            eprintln!("jobsd: {name}: {e}");
        }
        return Err(failed.swap_remove(0).1);
    }
    for (name, e) in &failed {
        eprintln!("jobsd: {name}: {e}");
    }
    match failed.len() {
        0 => Ok(()),
        n => Err(CliError::Partial {
            failed: n,
            total: n + deleted.len(),
        }),
    }
}

/// Asks on the terminal before deleting `names`; many jobs without a terminal are refused.
fn confirm(names: &[String], many: bool) -> Result<(), CliError> {
    let terminal = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    ask(
        names,
        many,
        terminal,
        &mut std::io::stdin().lock(),
        &mut std::io::stderr(),
    )
}

/// [`confirm`] with the terminal's answer read from `input` and the question written to
/// `prompt`.
fn ask(
    names: &[String],
    many: bool,
    terminal: bool,
    input: &mut impl BufRead,
    prompt: &mut impl Write,
) -> Result<(), CliError> {
    if !terminal {
        if many {
            return Err(CliError::NotConfirmed(format!(
                "refusing to delete {} job(s) selected by prefix or label without confirmation: \
                 there is no terminal to ask on; pass --yes",
                names.len()
            )));
        }
        // One job named on the command line: a script means it.
        return Ok(());
    }
    let mut shown: Vec<&str> = names.iter().take(NAMES_SHOWN).map(String::as_str).collect();
    if names.len() > NAMES_SHOWN {
        shown.push("…");
    }
    let question = match names {
        [one] => format!("Delete job {one}? [y/N] "),
        _ => format!("Delete {} jobs ({})? [y/N] ", names.len(), shown.join(", ")),
    };
    prompt.write_all(question.as_bytes())?;
    prompt.flush()?;
    let mut answer = String::new();
    input.read_line(&mut answer)?;
    if matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes") {
        Ok(())
    } else {
        Err(CliError::NotConfirmed("not deleted".to_owned()))
    }
}

/// What a delete did.
fn report_deleted(
    out: &Printer,
    deleted: &[String],
    failed: &[(String, CliError)],
) -> Result<(), CliError> {
    if !out.is_table() {
        return out.document(&json!({
            "count": deleted.len(),
            "deleted": deleted,
            "failed": failed
                .iter()
                .map(|(name, error)| json!({"name": name, "error": error.to_string()}))
                .collect::<Vec<_>>(),
        }));
    }
    match deleted {
        [] => Ok(()),
        [one] => out.line(&format!("deleted job {one}")),
        many => out.line(&format!("deleted {} jobs", many.len())),
    }
}

/// The body of a bulk pause or resume.
fn bulk_body(select: &SelectArgs, note: Option<&String>) -> Value {
    let mut body = json!({});
    if let Some(prefix) = &select.selector.prefix {
        body["prefix"] = json!(prefix);
    }
    if !select.selector.labels.is_empty() {
        body["label"] = json!(select.selector.labels);
    }
    if select.all {
        body["all"] = json!(true);
    }
    if let Some(note) = note {
        body["note"] = json!(note);
    }
    body
}

/// `jobsd jobs pause`.
pub async fn pause(client: &Client, args: &PauseArgs, out: &Printer) -> Result<(), CliError> {
    let note = args.note.as_ref().map(|n| json!({ "note": n }));
    steer_state(
        client,
        &args.select,
        out,
        "pause",
        note.as_ref(),
        args.note.as_ref(),
    )
    .await
}

/// `jobsd jobs resume`.
pub async fn resume(client: &Client, args: &SelectArgs, out: &Printer) -> Result<(), CliError> {
    steer_state(client, args, out, "resume", None, None).await
}

/// A pause or resume (`verb`) of one job by name, or of many through the bulk route.
async fn steer_state(
    client: &Client,
    select: &SelectArgs,
    out: &Printer,
    verb: &str,
    body: Option<&Value>,
    note: Option<&String>,
) -> Result<(), CliError> {
    if let Some(name) = &select.name {
        client
            .post(&client::job_path(name, &format!("/{verb}")), body)
            .await?;
        // The job as it is now: a resume of a job that was not paused changes nothing.
        let view = client.get(&client::job_path(name, "")).await?;
        if !out.is_table() {
            return out.document(&view);
        }
        return out.line(&format!("job {name}: {}", str_of(&view, "/status/state")));
    }
    if !select.selector.is_given() && !select.all {
        return Err(CliError::Usage(
            "give a job name, --prefix / --label to select jobs, or --all".to_owned(),
        ));
    }
    let answer = client
        .post(
            &format!("/jobsd/v1/jobs:{verb}"),
            Some(&bulk_body(select, note)),
        )
        .await?;
    if !out.is_table() {
        return out.document(&answer);
    }
    let count = answer.get("count").and_then(Value::as_u64).unwrap_or(0);
    let names: Vec<&str> = answer
        .get("names")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let done = if verb == "pause" { "paused" } else { "resumed" };
    let mut line = format!("{done} {count} job(s)");
    if !names.is_empty() {
        line.push_str(&format!(": {}", names.join(", ")));
        if answer.get("truncated") == Some(&Value::Bool(true)) {
            line.push_str(", …");
        }
    }
    out.line(&line)
}

/// `jobsd jobs trigger`.
pub async fn trigger(client: &Client, args: &TriggerArgs, out: &Printer) -> Result<(), CliError> {
    let body = args.overlap.map(|o| json!({ "overlap": o.wire() }));
    let answer = client
        .post(&client::job_path(&args.name, "/trigger"), body.as_ref())
        .await?;
    if !out.is_table() {
        return out.document(&answer);
    }
    out.line(&format!(
        "triggered job {}: execution {}",
        args.name,
        str_of(&answer, "/executionId")
    ))
}

/// `jobsd jobs backfill`.
pub async fn backfill(client: &Client, args: &BackfillArgs, out: &Printer) -> Result<(), CliError> {
    let mut body = json!({ "start": args.start, "end": args.end });
    if let Some(overlap) = args.overlap {
        body["overlap"] = json!(overlap.wire());
    }
    let answer = client
        .post(&client::job_path(&args.name, "/backfill"), Some(&body))
        .await?;
    if !out.is_table() {
        return out.document(&answer);
    }
    let executions = answer
        .get("executions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    out.line(&format!(
        "backfilling {} tick(s) of job {}, in order:",
        executions.len(),
        args.name
    ))?;
    let mut table = Table::new(&["SCHEDULED (UTC)", "EXECUTION"]);
    let rows: Vec<Vec<String>> = executions
        .iter()
        .map(|e| {
            vec![
                absolute_or_dash(time_of(e, "/scheduledTime")),
                str_of(e, "/executionId").to_owned(),
            ]
        })
        .collect();
    table.print(&rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: usize) -> Vec<String> {
        (1..=n).map(|i| format!("job-{i}")).collect()
    }

    fn asked(names: &[String], many: bool, terminal: bool, input: &str) -> (bool, String) {
        let mut prompt = Vec::new();
        let result = ask(names, many, terminal, &mut input.as_bytes(), &mut prompt);
        if let Err(e) = &result {
            assert!(matches!(e, CliError::NotConfirmed(_)), "{e}");
        }
        (result.is_ok(), String::from_utf8(prompt).unwrap())
    }

    #[test]
    fn a_terminal_is_asked_and_only_yes_deletes() {
        assert_eq!(
            asked(&names(1), false, true, "y\n"),
            (true, "Delete job job-1? [y/N] ".to_owned())
        );
        assert!(asked(&names(2), true, true, "YES\n").0);
        for no in ["\n", "n\n", "nope\n", ""] {
            assert!(!asked(&names(2), true, true, no).0, "{no:?}");
        }
        let (_, prompt) = asked(&names(12), true, true, "n\n");
        assert_eq!(
            prompt,
            "Delete 12 jobs (job-1, job-2, job-3, job-4, job-5, job-6, job-7, job-8, job-9, \
             job-10, …)? [y/N] "
        );
    }

    #[test]
    fn without_a_terminal_one_named_job_goes_and_a_selection_is_refused() {
        assert_eq!(asked(&names(1), false, false, ""), (true, String::new()));
        let (ok, prompt) = asked(&names(3), true, false, "y\n");
        assert!(!ok && prompt.is_empty());
    }
}
