//! An export as a stream of chunks of whole lines: the header, one chunk per store page of
//! jobs, the trailer. The store is read a page at a time as the client takes the chunks, so
//! memory stays at one page whatever the number of jobs.

use std::sync::Arc;

use bytes::Bytes;
use chrono::SecondsFormat;

use super::route_error_of;
use crate::api::{ApiError, ApiState};
use crate::backup::format::{self, ErrorLine, Header, Trailer};
use crate::proto::dapr_scheduler as sv1;
use crate::seam::{ExportCursor, ExportPage, Scheduler};

/// Jobs per store page (and per chunk).
const PAGE: usize = 1024;

/// Where an export is.
pub struct Exporter {
    scheduler: Arc<dyn Scheduler>,
    metadata: sv1::JobMetadata,
    /// The header line, until it goes out with the first page.
    header: Option<Vec<u8>>,
    /// A page read and not sent yet (the first one is read before answering, so that a
    /// refusal is an HTTP status or a gRPC code rather than a cut stream).
    ready: Option<ExportPage>,
    /// Where the next page starts; `None` once the last page was read.
    next: Option<ExportCursor>,
    /// Job lines sent.
    jobs: u64,
    /// The trailer (or an error line) went out.
    done: bool,
}

impl Exporter {
    /// Starts an export of this app's jobs; with `handover`, the trigger loop first stops
    /// firing them and lets every trigger out finish, so the export is their final state.
    pub async fn start(state: &ApiState, handover: bool) -> Result<Exporter, ApiError> {
        let scheduler = Arc::clone(&state.scheduler);
        let metadata = state.job_metadata();
        if handover {
            scheduler
                .backup()
                .map_err(route_error_of)?
                .hand_over(metadata.clone())
                .await
                .map_err(route_error_of)?;
        }
        let header = Header {
            format: format::FORMAT.to_owned(),
            version: format::VERSION,
            app: state.app_id.clone(),
            namespace: state.namespace.clone(),
            exported_at: state
                .clock
                .now()
                .to_rfc3339_opts(SecondsFormat::AutoSi, true),
            handover,
        };
        let first = scheduler
            .backup()
            .map_err(route_error_of)?
            .export_page(metadata.clone(), None, PAGE)
            .await
            .map_err(route_error_of)?;
        let mut line = serde_json::to_vec(&header).map_err(ApiError::encode_json)?;
        line.push(b'\n');
        Ok(Exporter {
            scheduler,
            metadata,
            header: Some(line),
            next: first.next.clone(),
            ready: Some(first),
            jobs: 0,
            done: false,
        })
    }

    /// The next chunk of lines; `None` after the trailer (or an error line).
    pub async fn next_chunk(&mut self) -> Option<Bytes> {
        if self.done {
            return None;
        }
        let mut out = self.header.take().unwrap_or_default();
        let page = match self.ready.take() {
            Some(page) => Ok(page),
            None => match self.next.take() {
                Some(cursor) => async {
                    self.scheduler
                        .backup()?
                        .export_page(self.metadata.clone(), Some(cursor), PAGE)
                        .await
                }
                .await
                .map_err(|e| e.message),
                None => {
                    self.done = true;
                    let trailer = Trailer {
                        end: true,
                        jobs: self.jobs,
                    };
                    line(&mut out, &trailer);
                    return Some(out.into());
                }
            },
        };
        match page.and_then(|page| self.write_page(&mut out, page)) {
            Ok(()) => {}
            Err(error) => {
                // The client keeps what came before, and learns why the rest is missing.
                tracing::error!(error = %error, jobs = self.jobs, "export failed part way");
                self.done = true;
                line(&mut out, &ErrorLine { error });
            }
        }
        Some(out.into())
    }

    fn write_page(&mut self, out: &mut Vec<u8>, page: ExportPage) -> Result<(), String> {
        out.reserve(page.records.len() * 512);
        for record in &page.records {
            format::write_record(out, record).map_err(|e| format!("job {:?}: {e}", record.name))?;
            out.push(b'\n');
            self.jobs += 1;
        }
        self.next = page.next;
        Ok(())
    }
}

fn line(out: &mut Vec<u8>, value: &impl serde::Serialize) {
    // These small structs always serialize.
    if serde_json::to_writer(&mut *out, value).is_ok() {
        out.push(b'\n');
    }
}
