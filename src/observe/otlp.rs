//! One OpenTelemetry span per delivery attempt, exported over OTLP/gRPC to
//! `--otlp-endpoint` (off by default: without the flag no [`Spans`] exists and delivery
//! builds nothing).
//!
//! Spans are built whole once the attempt is over and handed to the SDK's batch processor,
//! whose bounded queue drops spans when full and whose own thread does the exporting: a slow
//! or absent collector never holds a delivery back. Each span's trace id is the execution id
//! and its span id the one sent to the app in `traceparent`, so the app's own spans hang
//! under it; the create's `traceparent`, when one was stored, is a link.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use chrono::{DateTime, Utc};
use opentelemetry::trace::{
    Link, SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SpanData, SpanEvents, SpanLinks, SpanProcessor,
};

use super::trace::TraceParent;
use crate::clock::Clock;
use crate::proto::dapr_scheduler::job_target_metadata::Type as Target;
use crate::trigger::Trigger;

/// Spans waiting for export at most; more are dropped rather than held in memory or waited
/// for (a trigger burst runs at tens of thousands per second).
const MAX_QUEUE: usize = 8192;

/// How long one export may take.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long shutdown waits for the last spans to go out.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);

/// The exporter could not be set up.
#[derive(Debug, thiserror::Error)]
#[error("OTLP exporter for {endpoint}: {message}")]
pub struct Error {
    /// The configured endpoint.
    pub endpoint: String,
    /// What went wrong.
    pub message: String,
}

/// Where spans go and what they say about this sidecar. Cheap to clone (one `Arc`).
#[derive(Clone)]
pub struct Spans {
    inner: Arc<Inner>,
}

struct Inner {
    /// Queues spans and exports them in batches on its own thread.
    processor: BatchSpanProcessor,
    /// `jobsd` and its version, on every span.
    scope: InstrumentationScope,
    /// Start times come from the sidecar's clock, as every time in jobsd does.
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for Spans {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spans").finish_non_exhaustive()
    }
}

/// When an attempt began: on the sidecar's clock, and on the monotonic one for its duration.
#[derive(Debug, Clone, Copy)]
pub struct Started {
    /// Wall time (the sidecar's clock).
    at: DateTime<Utc>,
    /// Monotonic start.
    since: Instant,
}

/// What an attempt was: a job's delivery to the app or an actor reminder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `POST /job/<name>` or `OnJobEvent` (span `job.trigger`).
    Job,
    /// `PUT /actors/<type>/<id>/method/remind/<name>` (span `actor.reminder`).
    Reminder,
}

/// One finished delivery attempt.
#[derive(Debug)]
pub struct Attempt<'a> {
    /// Job or reminder.
    pub kind: Kind,
    /// The trigger delivered.
    pub trigger: &'a Trigger,
    /// The context sent to the app.
    pub trace: &'a TraceParent,
    /// When the call began.
    pub started: Started,
    /// What came of it: `success`, `not_found`, `failed`, `cancel`, `undeliverable`.
    pub outcome: &'static str,
    /// Why it failed, for the span's error status.
    pub error: Option<String>,
}

impl Spans {
    /// An exporter to the OTLP/gRPC collector at `endpoint` (`http://host:4317`), naming the
    /// service after the app as daprd does. Connects lazily; must be called within a Tokio
    /// runtime (the gRPC channel's tasks live there).
    pub fn start(
        endpoint: &str,
        app_id: &str,
        namespace: &str,
        clock: Arc<dyn Clock>,
    ) -> Result<Spans, Error> {
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .with_endpoint(endpoint)
            .with_timeout(EXPORT_TIMEOUT)
            .build()
            .map_err(|e| Error {
                endpoint: endpoint.to_owned(),
                message: e.to_string(),
            })?;
        let mut processor = BatchSpanProcessor::builder(exporter)
            .with_batch_config(
                BatchConfigBuilder::default()
                    .with_max_queue_size(MAX_QUEUE)
                    .build(),
            )
            .build();
        processor.set_resource(
            &Resource::builder_empty()
                .with_service_name(app_id.to_owned())
                .with_attribute(KeyValue::new("service.namespace", namespace.to_owned()))
                .build(),
        );
        Ok(Spans {
            inner: Arc::new(Inner {
                processor,
                scope: InstrumentationScope::builder("jobsd")
                    .with_version(env!("CARGO_PKG_VERSION"))
                    .build(),
                clock,
            }),
        })
    }

    /// Marks the start of an attempt.
    pub fn begin(&self) -> Started {
        Started {
            at: self.inner.clock.now(),
            since: Instant::now(),
        }
    }

    /// Queues the span of a finished attempt (dropped if the queue is full).
    pub fn record(&self, attempt: Attempt<'_>) {
        self.inner.processor.on_end(self.span(attempt));
    }

    fn span(&self, a: Attempt<'_>) -> SpanData {
        let t = a.trigger;
        let start = SystemTime::from(a.started.at);
        let lateness_ms = (a.started.at - t.scheduled_at).num_milliseconds();
        let mut attributes = Vec::with_capacity(10);
        attributes.extend([
            KeyValue::new("jobsd.job.name", t.name.to_string()),
            KeyValue::new("jobsd.execution.id", t.execution_id.to_string()),
            KeyValue::new("jobsd.attempt", i64::from(t.attempt)),
            KeyValue::new("jobsd.lateness_ms", lateness_ms),
            KeyValue::new("jobsd.app_id", t.metadata.app_id.clone()),
            KeyValue::new("jobsd.namespace", t.metadata.namespace.clone()),
            KeyValue::new("jobsd.outcome", a.outcome),
        ]);
        if let Some(Target::Actor(actor)) =
            t.metadata.target.as_ref().and_then(|t| t.r#type.as_ref())
        {
            attributes.push(KeyValue::new("jobsd.actor.type", actor.r#type.clone()));
            attributes.push(KeyValue::new("jobsd.actor.id", actor.id.clone()));
        }
        let links = t
            .created_by
            .as_deref()
            .and_then(TraceParent::parse)
            .map(|created| {
                let context = SpanContext::new(
                    TraceId::from_bytes(created.trace_id),
                    SpanId::from_bytes(created.span_id),
                    TraceFlags::new(created.flags),
                    true,
                    TraceState::default(),
                );
                vec![Link::new(
                    context,
                    vec![KeyValue::new("jobsd.link", "create")],
                    0,
                )]
            })
            .unwrap_or_default();
        let mut span_links = SpanLinks::default();
        span_links.links = links;
        SpanData {
            span_context: SpanContext::new(
                TraceId::from_bytes(a.trace.trace_id),
                SpanId::from_bytes(a.trace.span_id),
                TraceFlags::SAMPLED,
                false,
                TraceState::default(),
            ),
            // Each attempt is a root of the execution's trace: there is no span of the
            // execution as a whole (it would end only when its last attempt does).
            parent_span_id: SpanId::INVALID,
            parent_span_is_remote: false,
            span_kind: SpanKind::Client,
            name: match a.kind {
                Kind::Job => "job.trigger".into(),
                Kind::Reminder => "actor.reminder".into(),
            },
            start_time: start,
            end_time: start + a.started.since.elapsed(),
            attributes,
            dropped_attributes_count: 0,
            events: SpanEvents::default(),
            links: span_links,
            status: match a.error {
                Some(message) => Status::error(message),
                None => Status::Unset,
            },
            instrumentation_scope: self.inner.scope.clone(),
        }
    }

    /// Exports what is queued and stops the exporter (waiting at most a few seconds for a
    /// collector that does not answer). Spans recorded afterwards are dropped.
    pub async fn shutdown(&self) {
        let inner = self.inner.clone();
        let done = tokio::task::spawn_blocking(move || {
            inner.processor.shutdown_with_timeout(SHUTDOWN_TIMEOUT)
        })
        .await;
        match done {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "OTLP exporter did not shut down cleanly"),
            Err(e) => tracing::warn!(error = %e, "OTLP exporter shutdown failed"),
        }
    }
}
