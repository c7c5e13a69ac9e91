//! Backup and restore of this app's jobs with their progress (`docs/export-format.md`):
//!
//! - `GET /jobsd/v1/export[?handover=true]`: NDJSON, streamed (chunked) page by page from
//!   the store: a header line, one line per job (active ones, then finished ones), a trailer.
//!   `handover` first stops this jobsd firing the app's jobs (until it restarts) and waits
//!   for every trigger out, so the export is their final state: import it elsewhere and no
//!   tick fires twice.
//! - `POST /jobsd/v1/import[?overwrite=true]`: an export (or a Dapr Scheduler export), read as
//!   it streams in and written in batches through the store's group commit; jobs that exist
//!   are skipped unless `overwrite`. Answers `{"created","replaced","skipped","failed":[…]}`.
//!
//! gRPC: `jobsd.v1.Jobs/ExportJobs` (server streaming) and `ImportJobs` (client streaming)
//! carry the same NDJSON bytes. The embedded scheduler only: remote mode answers 412.
//!
//! The format, the Dapr export decoder and the line reader are transport-free, in
//! `crate::backup`; this folder holds the routes and the streaming around them.

mod export;
mod import;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use http::{StatusCode, Uri, header};

pub use export::Exporter;
pub use import::{Failure, MAX_LISTED_FAILURES, Summary, import};

use super::{bad_request, route_error};
use crate::api::ApiError;
use crate::api::http_parts::{Shared, json_response};
use crate::api::http_request::query_params;
use crate::proto::jobsd_api as jv1;

/// The routes of this file.
pub fn routes() -> Router<Shared> {
    Router::new()
        .route("/jobsd/v1/export", get(export_route))
        .route("/jobsd/v1/import", post(import_route))
}

/// A scheduler error on the backup routes.
fn route_error_of(err: crate::seam::Error) -> ApiError {
    route_error(err, "ERR_JOB_NOT_FOUND", "ERR_JOBSD_BUSY")
}

/// The one boolean query parameter `name` of `uri` (absent: false); 400 naming it otherwise.
fn flag(uri: &Uri, name: &str) -> Result<bool, ApiError> {
    let mut value = false;
    for (key, v) in query_params(uri.query().unwrap_or_default())? {
        if key != name {
            return Err(bad_request(format!("unknown query parameter {key:?}")));
        }
        value = match v.as_str() {
            "true" | "1" | "" => true,
            "false" | "0" => false,
            other => {
                return Err(bad_request(format!(
                    "{name}: {other:?} is not true or false"
                )));
            }
        };
    }
    Ok(value)
}

async fn export_route(State(state): State<Shared>, uri: Uri) -> Response {
    let started = async {
        let handover = flag(&uri, "handover")?;
        Exporter::start(&state, handover).await
    }
    .await;
    match started {
        Ok(exporter) => {
            let chunks = futures_util::stream::unfold(exporter, |mut e| async move {
                let chunk = e.next_chunk().await?;
                Some((Ok::<_, std::convert::Infallible>(chunk), e))
            });
            (
                StatusCode::OK,
                [(header::CONTENT_TYPE, "application/x-ndjson")],
                Body::from_stream(chunks),
            )
                .into_response()
        }
        Err(e) => e.into_response(),
    }
}

async fn import_route(State(state): State<Shared>, uri: Uri, body: Body) -> Response {
    let done = async {
        let overwrite = flag(&uri, "overwrite")?;
        let summary = import(&state, body.into_data_stream(), overwrite).await?;
        let json = serde_json::to_string(&summary).map_err(ApiError::encode_json)?;
        Ok::<_, ApiError>(json_response(json))
    }
    .await;
    done.unwrap_or_else(IntoResponse::into_response)
}

/// `jobsd.v1.Jobs/ExportJobs`'s stream of chunks.
pub type ExportStream = std::pin::Pin<
    Box<dyn futures_util::Stream<Item = Result<jv1::ExportJobsChunk, tonic::Status>> + Send>,
>;

/// The chunks of an export over gRPC (refusals come before the stream, as a status).
pub async fn grpc_export(
    state: &crate::api::ApiState,
    handover: bool,
) -> Result<ExportStream, ApiError> {
    let exporter = Exporter::start(state, handover).await?;
    Ok(Box::pin(futures_util::stream::unfold(
        exporter,
        |mut e| async move {
            let chunk = e.next_chunk().await?;
            Some((
                Ok(jv1::ExportJobsChunk {
                    ndjson: chunk.to_vec(),
                }),
                e,
            ))
        },
    )))
}

/// An import over gRPC: `overwrite` from the first chunk, the bytes of all of them.
pub async fn grpc_import(
    state: &crate::api::ApiState,
    mut chunks: tonic::Streaming<jv1::ImportJobsChunk>,
) -> Result<jv1::ImportJobsResponse, ApiError> {
    use futures_util::StreamExt;
    let first = chunks
        .next()
        .await
        .transpose()
        .map_err(|e| bad_request(format!("reading the first chunk: {}", e.message())))?
        .unwrap_or_default();
    let overwrite = first.overwrite;
    let bytes = futures_util::stream::once(async move { Ok(bytes::Bytes::from(first.ndjson)) })
        .chain(chunks.map(|c| c.map(|c| bytes::Bytes::from(c.ndjson))))
        .map(|r| r.map_err(|status| status.message().to_owned()));
    let summary = import(state, Box::pin(bytes), overwrite).await?;
    Ok(jv1::ImportJobsResponse {
        created: summary.created,
        replaced: summary.replaced,
        skipped: summary.skipped,
        failed: summary
            .failed
            .into_iter()
            .map(|f| jv1::ImportFailure {
                line: f.line,
                name: f.name,
                error: f.error,
            })
            .collect(),
        failed_count: summary.failed_count,
        not_this_app: summary.not_this_app,
    })
}
