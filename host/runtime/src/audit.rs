//! The audit trail from the configuration (`[audit]`), and the record of
//! a call: who asked, which code ran (its digest), under which grants,
//! who decided and how, what came back (its class and digest) and how
//! long it took. The trail itself (chaining, signing, writing, verifying)
//! is `airlock_audit`'s; this module knows what a call is.

use crate::call::{Caller, ToolResult};
use airlock_audit::{AuditLog, OnFailure, Options, SigningKey, Sink, chain::sha256};
use airlock_core::config::{AuditFailure, Config};
use airlock_core::grants::CallGrants;
use airlock_core::secrets::Secrets;
use serde::Serialize;
use std::sync::Arc;

/// The most of an input a record holds (`[audit] inputs`); its digest
/// always covers all of it.
const INPUT_CHARS: usize = 16 << 10;

/// Opens the trail `config` asks for, if it asks for one.
pub fn open(config: &Config) -> anyhow::Result<Option<Arc<AuditLog>>> {
    let audit = &config.audit;
    if !audit.enabled {
        return Ok(None);
    }
    let sink = match audit.path.as_deref() {
        Some("-") => Sink::Stdout,
        Some(p) if p.starts_with("unix:") => Sink::Unix(p["unix:".len()..].into()),
        _ => Sink::File(audit.sink_path().ok_or_else(|| {
            anyhow::anyhow!(
                "[audit] has no path and there is no state directory (set HOME or \
                 XDG_STATE_HOME)"
            )
        })?),
    };
    let key = match &audit.key {
        Some(path) => {
            let text = airlock_core::host_files::read_text_capped(
                path,
                64 << 10,
                airlock_core::host_files::Links::Follow,
            )
            .map_err(|e| anyhow::anyhow!("[audit] key {}: {e}", path.display()))?;
            Some(
                SigningKey::from_pem(&text)
                    .map_err(|e| anyhow::anyhow!("[audit] key {}: {e}", path.display()))?,
            )
        }
        None => None,
    };
    let replica = audit.replica.clone().unwrap_or_else(|| {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "localhost".into());
        format!("{host}:{}", std::process::id())
    });
    let mut options = Options::new(sink, replica);
    options.key = key;
    options.checkpoint_every = audit.checkpoint_every.max(1);
    options.checkpoint_interval = std::time::Duration::from_secs(audit.checkpoint_seconds.max(1));
    options.on_failure = match audit.on_failure {
        AuditFailure::Fail => OnFailure::Fail,
        AuditFailure::Drop => OnFailure::Drop,
    };
    options.max_file_bytes = audit.max_file_mib.max(1) << 20;
    if let Some(url) = &audit.otlp {
        options.mirror = Some(otlp_mirror(url)?);
    }
    let log = AuditLog::open(options).map_err(|e| anyhow::anyhow!("[audit]: {e}"))?;
    Ok(Some(Arc::new(log)))
}

/// What one call is recorded as.
pub(crate) struct CallRecord<'a> {
    /// The tool's origin (`bundled (…)`, a file, `MCP server `…``).
    pub origin: Option<String>,
    /// The digest of the code that ran, when it has one.
    pub digest: Option<&'a str>,
    /// The session (or the MCP context) the call ran in.
    pub session: &'a str,
    /// Who asked.
    pub caller: Option<&'a Caller>,
    /// The input as the model gave it, as JSON text.
    pub input: String,
    /// Whether the input itself is kept (`[audit] inputs`): the secrets
    /// it is redacted of.
    pub keep_input: Option<&'a Secrets>,
    /// The grants in effect.
    pub grants: &'a CallGrants,
    /// How it ended.
    pub result: &'a ToolResult,
}

/// A path, written as text without being copied into a string first.
struct Shown<'a>(std::path::Display<'a>);

impl Serialize for Shown<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&self.0)
    }
}

/// A mount as a record lists it.
#[derive(Serialize)]
struct MountField<'a> {
    path: Shown<'a>,
    seen_as: &'a str,
    access: &'static str,
}

/// The grants as a record lists them.
#[derive(Serialize)]
struct GrantFields<'a> {
    mounts: Vec<MountField<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    hosts: Option<&'a [String]>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    env: Vec<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    programs: Vec<Shown<'a>>,
}

/// A call's record, serialized straight from what the call holds.
#[derive(Serialize)]
struct CallFields<'a> {
    tool: &'a str,
    tool_use_id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    origin: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    digest: Option<&'a str>,
    session: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    caller: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    client: Option<&'a str>,
    input_digest: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    input: Option<String>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    input_truncated: bool,
    decision: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    decided_by: Option<String>,
    grants: GrantFields<'a>,
    result: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_digest: Option<String>,
    duration_us: u64,
}

impl CallRecord<'_> {
    /// The record's fields, as the text of a JSON object.
    pub(crate) fn fields(self) -> String {
        let r = self.result;
        let mut input_truncated = false;
        let input = self.keep_input.map(|secrets| {
            let mut input = self.input.clone();
            secrets.redact_in_place(&mut input);
            if input.len() > INPUT_CHARS {
                let mut cut = INPUT_CHARS;
                while !input.is_char_boundary(cut) {
                    cut -= 1;
                }
                input.truncate(cut);
                input_truncated = true;
            }
            input
        });
        let g = self.grants;
        let grants = GrantFields {
            mounts: g
                .mounts
                .iter()
                .map(|m| MountField {
                    path: Shown(m.mount.configured.display()),
                    seen_as: &m.mount.guest,
                    access: if m.writable {
                        "read-write"
                    } else {
                        "read-only"
                    },
                })
                .collect(),
            hosts: g.network.as_ref().map(|n| n.granted.as_slice()),
            env: g.env.iter().map(|(k, _)| k.as_str()).collect(),
            programs: g
                .programs
                .granted
                .iter()
                .map(|p| Shown(p.path.display()))
                .collect(),
        };
        let (result, output_digest) = match &r.outcome {
            Ok(output) => ("ok", Some(sha256(output.text_content().as_bytes()))),
            Err(e) => (e.class.as_str(), None),
        };
        let fields = CallFields {
            tool: &r.name,
            tool_use_id: &r.id,
            origin: self.origin.as_deref(),
            digest: self.digest,
            session: self.session,
            caller: self.caller.map(|c| c.subject.as_str()),
            client: self.caller.and_then(|c| c.client_id.as_deref()),
            input_digest: sha256(self.input.as_bytes()),
            input,
            input_truncated,
            decision: r.permission.as_ref().map(|p| p.decision),
            decided_by: r.permission.as_ref().map(|p| p.source.to_string()),
            grants,
            result,
            output_digest,
            duration_us: u64::try_from(r.duration.as_micros()).unwrap_or(u64::MAX),
        };
        serde_json::to_string(&fields).expect("a record serializes")
    }
}

/// Each record also exported to the OTLP/HTTP logs endpoint `url`.
#[cfg(feature = "otel")]
fn otlp_mirror(url: &str) -> anyhow::Result<airlock_audit::Mirror> {
    crate::pipeline::telemetry::otlp_log_mirror(url)
}

#[cfg(not(feature = "otel"))]
fn otlp_mirror(_url: &str) -> anyhow::Result<airlock_audit::Mirror> {
    anyhow::bail!("[audit] otlp needs Airlock built with the `otel` feature")
}
