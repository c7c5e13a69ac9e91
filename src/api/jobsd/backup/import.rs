//! An import: the header checked before anything is written, then the job lines parsed and
//! written in batches (one store write, one group commit each) while the next batch is being
//! parsed. A bad line is reported with its number and the others go on; a stream without its
//! trailer is reported as cut short, after everything before the cut was imported.

use std::sync::Arc;

use bytes::Bytes;
use futures_util::Stream;
use serde::Serialize;

use super::route_error_of;
use crate::api::jobsd::bad_request;
use crate::api::{ApiError, ApiState};
use crate::backup::dapr;
use crate::backup::format::{self, ErrorLine, Header, Trailer};
use crate::backup::lines::{Line, Lines, LinesError};
use crate::proto::dapr_scheduler as sv1;
use crate::seam::{self, BackupRecord, Imported, Scheduler};

/// Records per store write.
const BATCH: usize = 1024;

/// Failures listed one by one in a summary; the rest are only counted.
pub const MAX_LISTED_FAILURES: usize = 1000;

/// What an import did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// Jobs created.
    pub created: u64,
    /// Jobs that replaced one of the same name (`overwrite`).
    pub replaced: u64,
    /// Jobs left alone because one of that name exists.
    pub skipped: u64,
    /// The lines that failed, in order (at most [`MAX_LISTED_FAILURES`]).
    pub failed: Vec<Failure>,
    /// Every line that failed, listed or not.
    pub failed_count: u64,
    /// Jobs of a Dapr Scheduler export that are not this app's (other apps, actor
    /// reminders, workflows): not imported.
    #[serde(skip_serializing_if = "is_zero")]
    pub not_this_app: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One line that was not imported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Failure {
    /// Its number in the stream, from 1 (the header is line 1).
    pub line: u64,
    /// The job's name, when the line has one.
    pub name: String,
    /// Why.
    pub error: String,
}

impl Summary {
    fn fail(&mut self, line: u64, name: impl Into<String>, error: impl Into<String>) {
        self.failed_count += 1;
        if self.failed.len() < MAX_LISTED_FAILURES {
            self.failed.push(Failure {
                line,
                name: name.into(),
                error: error.into(),
            });
        }
    }

    fn count(&mut self, outcome: Imported) {
        match outcome {
            Imported::Created => self.created += 1,
            Imported::Replaced => self.replaced += 1,
            Imported::Skipped => self.skipped += 1,
        }
    }
}

/// A batch on its way to the store: its lines' numbers and names, and the write.
type Pending = (
    Vec<(u64, String)>,
    tokio::task::JoinHandle<Result<Vec<Result<Imported, seam::Error>>, seam::Error>>,
);

/// The importing side: where batches go.
struct Writer {
    scheduler: Arc<dyn Scheduler>,
    metadata: sv1::JobMetadata,
    overwrite: bool,
    /// The batch being written, if any.
    pending: Option<Pending>,
}

impl Writer {
    /// Starts writing `batch` once the one before is written (whose outcomes go to
    /// `summary`): parsing goes on while the store commits.
    async fn push(
        &mut self,
        batch: Vec<(u64, BackupRecord)>,
        summary: &mut Summary,
    ) -> Result<(), ApiError> {
        self.settle(summary).await?;
        if batch.is_empty() {
            return Ok(());
        }
        let numbers = batch.iter().map(|(n, r)| (*n, r.name.clone())).collect();
        let records = batch.into_iter().map(|(_, r)| r).collect();
        let scheduler = Arc::clone(&self.scheduler);
        let (metadata, overwrite) = (self.metadata.clone(), self.overwrite);
        let write = tokio::spawn(async move {
            scheduler
                .backup()?
                .import_batch(metadata, records, overwrite)
                .await
        });
        self.pending = Some((numbers, write));
        Ok(())
    }

    /// Waits for the batch being written and counts its outcomes.
    async fn settle(&mut self, summary: &mut Summary) -> Result<(), ApiError> {
        let Some((numbers, write)) = self.pending.take() else {
            return Ok(());
        };
        let outcomes = write
            .await
            .map_err(|e| {
                route_error_of(seam::Error::new(
                    tonic::Code::Internal,
                    format!("import batch: {e}"),
                ))
            })?
            .map_err(route_error_of)?;
        for ((number, name), outcome) in numbers.into_iter().zip(outcomes) {
            match outcome {
                Ok(outcome) => summary.count(outcome),
                Err(e) => summary.fail(number, name, e.message),
            }
        }
        Ok(())
    }
}

/// Imports the export read from `body` as this app's jobs. Refuses (nothing written) a
/// scheduler that cannot restore jobs, a stream that is not an export, or one of a version
/// this jobsd does not read; otherwise answers what became of every line.
pub async fn import<S, E>(state: &ApiState, body: S, overwrite: bool) -> Result<Summary, ApiError>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    let scheduler = Arc::clone(&state.scheduler);
    let metadata = state.job_metadata();
    // Refused before the body is read when the scheduler cannot restore at all.
    scheduler
        .backup()
        .map_err(route_error_of)?
        .import_batch(metadata.clone(), Vec::new(), overwrite)
        .await
        .map_err(route_error_of)?;
    let max_line = state.body_limit().saturating_mul(2).max(1 << 20);
    let mut lines = Lines::new(body, max_line);
    let head = lines.peek(64).await.map_err(read_error)?;
    let first = head.iter().find(|b| !b.is_ascii_whitespace()).copied();
    let mut writer = Writer {
        scheduler,
        metadata,
        overwrite,
        pending: None,
    };
    let mut summary = Summary::default();
    if first != Some(b'{') {
        if dapr::looks_like_dapr_export(head) {
            let bytes = lines
                .rest(dapr::MAX_FILE)
                .await
                .map_err(read_error)?
                .ok_or_else(|| bad_request(dapr::too_large()))?;
            let found = dapr::records(&bytes, &writer.metadata).map_err(bad_request)?;
            summary.not_this_app = found.not_ours;
            for (i, chunk) in found.records.chunks(BATCH).enumerate() {
                let batch = chunk
                    .iter()
                    .enumerate()
                    .map(|(j, r)| ((i * BATCH + j + 1) as u64, r.clone()))
                    .collect();
                writer.push(batch, &mut summary).await?;
            }
            writer.settle(&mut summary).await?;
            return Ok(summary);
        }
        return Err(bad_request(format!(
            "not a jobsd export: the first line must be the header \
             {{\"format\":\"{}\",\"version\":{},…}}; the input starts with {}",
            format::FORMAT,
            format::VERSION,
            describe(head)
        )));
    }
    let header = lines.next_line().await.map_err(read_error)?;
    check_header(header.as_ref())?;
    let mut batch = Vec::with_capacity(BATCH);
    let mut jobs = 0u64;
    let mut ended = false;
    while let Some(line) = lines.next_line().await.map_err(read_error)? {
        if line.bytes.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        if ended {
            summary.fail(line.number, "", "a line after the trailer line");
            continue;
        }
        match classify(&line) {
            Kind::Job => match format::read_record(&line.bytes) {
                Ok(record) => {
                    jobs += 1;
                    batch.push((line.number, record));
                    if batch.len() == BATCH {
                        let full = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
                        writer.push(full, &mut summary).await?;
                    }
                }
                Err((name, error)) => {
                    jobs += 1;
                    summary.fail(
                        line.number,
                        name.unwrap_or_default(),
                        truncated(&line, error),
                    );
                }
            },
            Kind::Trailer(t) => {
                ended = true;
                if t.jobs != jobs {
                    summary.fail(
                        line.number,
                        "",
                        format!(
                            "the trailer counts {} jobs but {jobs} job lines came before it",
                            t.jobs
                        ),
                    );
                }
            }
            Kind::Error(e) => {
                summary.fail(
                    line.number,
                    "",
                    format!("the export failed at this point: {}", e.error),
                );
                ended = true;
            }
        }
    }
    writer.push(batch, &mut summary).await?;
    writer.settle(&mut summary).await?;
    // A batch's refusals come after the parse errors of the lines read while it was written.
    summary.failed.sort_by_key(|f| f.line);
    if !ended {
        summary.fail(
            lines.count() + 1,
            "",
            format!(
                "the stream ended without the trailer line {{\"end\":true,…}}: it was cut \
                 short; the {jobs} job lines before the cut were read"
            ),
        );
    }
    Ok(summary)
}

/// What a line after the header is.
enum Kind {
    Job,
    Trailer(Trailer),
    Error(ErrorLine),
}

fn classify(line: &Line) -> Kind {
    // Job lines start with `{"name"` when written by jobsd; look further only for the rest.
    if line.bytes.starts_with(b"{\"name\"") {
        return Kind::Job;
    }
    if let Ok(t) = serde_json::from_slice::<Trailer>(&line.bytes) {
        return Kind::Trailer(t);
    }
    if let Ok(e) = serde_json::from_slice::<ErrorLine>(&line.bytes) {
        return Kind::Error(e);
    }
    Kind::Job
}

/// A parse error of a line, saying so when the line is the cut-off end of the stream.
fn truncated(line: &Line, error: String) -> String {
    if line.terminated {
        error
    } else {
        format!("{error} (the last line has no newline: the stream was cut short)")
    }
}

fn check_header(line: Option<&Line>) -> Result<Header, ApiError> {
    let line = line.ok_or_else(|| bad_request("the export is empty".to_owned()))?;
    let header: Header = serde_json::from_slice(&line.bytes).map_err(|e| {
        bad_request(format!(
            "line 1: not a jobsd export header {{\"format\":\"{}\",\"version\":…}}: {e}",
            format::FORMAT
        ))
    })?;
    if header.format != format::FORMAT {
        return Err(bad_request(format!(
            "line 1: format {:?} is not {:?}",
            header.format,
            format::FORMAT
        )));
    }
    if header.version != format::VERSION {
        return Err(bad_request(format!(
            "line 1: export format version {} is not supported: this jobsd reads version {}",
            header.version,
            format::VERSION
        )));
    }
    Ok(header)
}

fn read_error(err: LinesError) -> ApiError {
    bad_request(err.to_string())
}

/// The first bytes of an input, for an error message.
fn describe(head: &[u8]) -> String {
    let shown = &head[..head.len().min(16)];
    if shown.is_empty() {
        return "nothing (it is empty)".to_owned();
    }
    let hex: Vec<String> = shown.iter().map(|b| format!("{b:02x}")).collect();
    format!("bytes {}", hex.join(" "))
}
