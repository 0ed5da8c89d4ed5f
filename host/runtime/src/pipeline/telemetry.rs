//! Telemetry: every tool use runs in a `tracing` span that follows the
//! OpenTelemetry GenAI conventions: named `execute_tool {name}` (through
//! `otel.name`; the `tracing` name is `execute_tool`), kind internal, with
//! `gen_ai.operation.name`, `gen_ai.tool.name`, `gen_ai.tool.call.id`,
//! `gen_ai.tool.type`, who asked (`enduser.id`, `airlock.client_id`, when
//! a front end authenticated them), and, as they become known, the
//! permission decision
//! and who made it, the duration, and `error.type` (the classified error).
//! Inputs and outputs are never recorded.
//!
//! With the `otel` cargo feature, `otlp_layer` exports these spans over
//! OTLP/HTTP to `OTEL_EXPORTER_OTLP_ENDPOINT`.

use crate::call::Caller;
use airlock_core::error::CallError;
use tracing::field::Empty;

/// The span of one tool use.
pub fn span(tool: &str, tool_use_id: &str, caller: Option<&Caller>) -> tracing::Span {
    let span = tracing::info_span!(
        "execute_tool",
        otel.name = %format!("execute_tool {tool}"),
        otel.kind = "internal",
        otel.status_code = Empty,
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = %tool,
        gen_ai.tool.call.id = %tool_use_id,
        gen_ai.tool.type = "function",
        enduser.id = Empty,
        airlock.client_id = Empty,
        airlock.permission.decision = Empty,
        airlock.permission.source = Empty,
        airlock.duration_ms = Empty,
        error.type = Empty,
    );
    if let Some(caller) = caller {
        span.record("enduser.id", caller.subject.as_str());
        if let Some(client) = &caller.client_id {
            span.record("airlock.client_id", client.as_str());
        }
    }
    span
}

/// Records the permission decision (`allow` or `deny`) and who made it.
pub fn record_decision(span: &tracing::Span, decision: &str, source: &str) {
    span.record("airlock.permission.decision", decision);
    span.record("airlock.permission.source", source);
}

/// Records how the use ended.
pub fn record_outcome(
    span: &tracing::Span,
    outcome: Result<(), &CallError>,
    duration: std::time::Duration,
) {
    span.record("airlock.duration_ms", duration.as_secs_f64() * 1000.0);
    match outcome {
        Ok(()) => {
            span.record("otel.status_code", "OK");
        }
        Err(e) => {
            span.record("error.type", e.class.as_str());
            span.record("otel.status_code", "ERROR");
        }
    }
}

/// A `tracing` layer exporting spans over OTLP/HTTP (protobuf) to
/// `endpoint` (a traces URL such as `http://collector:4318/v1/traces`), or,
/// when `None`, to `OTEL_EXPORTER_OTLP_ENDPOINT` (or
/// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`), with the service name `airlock`.
/// Keep the returned provider and call `shutdown` on it before exiting, so
/// the last spans are flushed.
#[cfg(feature = "otel")]
pub fn otlp_layer<S>(
    endpoint: Option<&str>,
) -> anyhow::Result<(
    impl tracing_subscriber::Layer<S>,
    opentelemetry_sdk::trace::SdkTracerProvider,
)>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_otlp::WithExportConfig as _;
    // reqwest's client needs a process-wide TLS provider when its rustls
    // comes without one (as airlock-oci asks); another part of the process
    // may have installed it already.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut exporter = opentelemetry_otlp::SpanExporter::builder().with_http();
    if let Some(url) = endpoint {
        exporter = exporter.with_endpoint(url);
    }
    let exporter = exporter.build()?;
    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(service())
        .build();
    let tracer = provider.tracer("airlock");
    Ok((tracing_opentelemetry::layer().with_tracer(tracer), provider))
}

/// The audit trail's records exported as OpenTelemetry log records (body:
/// the record's line; event name `airlock.audit`) over OTLP/HTTP to `url`
/// (a logs URL such as `http://collector:4318/v1/logs`), batched; the
/// last batch is sent when the trail closes.
#[cfg(feature = "otel")]
pub fn otlp_log_mirror(url: &str) -> anyhow::Result<airlock_audit::Mirror> {
    use opentelemetry::logs::{
        AnyValue, LogRecord as _, Logger as _, LoggerProvider as _, Severity,
    };
    use opentelemetry_otlp::WithExportConfig as _;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let exporter = opentelemetry_otlp::LogExporter::builder()
        .with_http()
        .with_endpoint(url)
        .build()?;
    let provider = opentelemetry_sdk::logs::SdkLoggerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(service())
        .build();
    let logger = provider.logger("airlock.audit");
    /// Flushes the exporter when the trail lets go of it.
    struct Flushed(opentelemetry_sdk::logs::SdkLoggerProvider);
    impl Drop for Flushed {
        fn drop(&mut self) {
            let _ = self.0.shutdown();
        }
    }
    let flushed = Flushed(provider);
    Ok(airlock_audit::Mirror(std::sync::Arc::new(
        move |line: &str| {
            let _ = &flushed;
            let mut record = logger.create_log_record();
            record.set_event_name("airlock.audit");
            record.set_severity_number(Severity::Info);
            record.set_body(AnyValue::from(line.to_string()));
            logger.emit(record);
        },
    )))
}

/// What Airlock's spans and log records say they come from.
#[cfg(feature = "otel")]
fn service() -> opentelemetry_sdk::Resource {
    opentelemetry_sdk::Resource::builder()
        .with_service_name("airlock")
        .build()
}
