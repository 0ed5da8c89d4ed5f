//! The audit trail from the configuration (`[audit]`), and the record of
//! a call: who asked, which code ran (its digest), under which grants,
//! who decided and how, what came back (its class and digest) and how
//! long it took. The trail itself (chaining, signing, writing, verifying)
//! is `airlock_audit`'s; this module knows what a call is.

use crate::call::{Caller, ToolResult};
use airlock_audit::chain::{sha256, sha256_of};
use airlock_audit::{AuditLog, OnFailure, Options, SigningKey, Sink};
use airlock_core::config::{AuditFailure, AuditSink, Config};
use airlock_core::grants::CallGrants;
use airlock_core::secrets::Secrets;
use airlock_core::tool::{ContentBlock, Tool, ToolOutput};
use std::borrow::Cow;
use std::fmt::Write as _;
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
    let sink = match &audit.path {
        Some(AuditSink::Stdout) => Sink::Stdout,
        Some(AuditSink::Unix(socket)) => Sink::Unix(socket.clone()),
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
    // A loaded configuration refuses zeros; one an embedder built is held
    // to at least 1 here.
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
    /// The tool that ran (its origin, `bundled (…)`, a file, `MCP server
    /// `…``, and the digest of its code when it has one).
    pub tool: Option<&'a dyn Tool>,
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

impl CallRecord<'_> {
    /// The record's fields, as the text of a JSON object. Written by hand,
    /// not through serde: this runs on every call's path, after the call,
    /// when the caches hold the call's code and data, and a serializer's
    /// code cost several times what it wrote (`per_call/airlock_sleep_0_audited`
    /// in the `overhead` bench).
    pub(crate) fn fields(self) -> String {
        let r = self.result;
        let mut out = Json(String::with_capacity(
            640 + self
                .keep_input
                .map_or(0, |_| self.input.len().min(INPUT_CHARS) + 32),
        ));
        out.0.push('{');
        out.member("tool", &r.name);
        out.member("tool_use_id", &r.id);
        if let Some(tool) = self.tool {
            out.member_shown("origin", tool.origin());
            if let Some(digest) = tool.digest() {
                out.member("digest", digest);
            }
        }
        out.member("session", self.session);
        if let Some(caller) = self.caller {
            out.member("caller", &caller.subject);
            if let Some(client) = &caller.client_id {
                out.member("client", client);
            }
        }
        out.member("input_digest", &sha256(self.input.as_bytes()));
        if let Some(secrets) = self.keep_input {
            let mut input = self.input;
            secrets.redact_in_place(&mut input);
            let truncated = input.len() > INPUT_CHARS;
            if truncated {
                let mut cut = INPUT_CHARS;
                while !input.is_char_boundary(cut) {
                    cut -= 1;
                }
                input.truncate(cut);
            }
            out.member("input", &input);
            if truncated {
                out.0.push_str(",\"input_truncated\":true");
            }
        }
        match &r.permission {
            Some(p) => {
                out.member("decision", p.decision);
                out.member_shown("decided_by", &p.source);
            }
            None => out.0.push_str(",\"decision\":null"),
        }
        let g = self.grants;
        out.0.push_str(",\"grants\":{\"mounts\":[");
        for (i, m) in g.mounts.iter().enumerate() {
            out.0.push_str(if i == 0 { "{" } else { ",{" });
            out.member_shown("path", m.mount.configured.display());
            out.member("seen_as", &m.mount.guest);
            out.member(
                "access",
                if m.writable {
                    "read-write"
                } else {
                    "read-only"
                },
            );
            out.0.push('}');
        }
        out.0.push(']');
        if let Some(network) = &g.network {
            out.list("hosts", network.granted.iter().map(String::as_str));
        }
        if !g.env.is_empty() {
            out.list("env", g.env.iter().map(|(k, _)| k.as_str()));
        }
        if !g.programs.granted.is_empty() {
            out.0.push_str(",\"programs\":[");
            for (i, p) in g.programs.granted.iter().enumerate() {
                if i > 0 {
                    out.0.push(',');
                }
                out.string(p.path.display());
            }
            out.0.push(']');
        }
        out.0.push('}');
        match &r.outcome {
            Ok(output) => {
                out.member("result", "ok");
                out.member("output_digest", &output_digest(output));
            }
            Err(e) => out.member("result", e.class.as_str()),
        }
        let micros = u64::try_from(r.duration.as_micros()).unwrap_or(u64::MAX);
        let _ = write!(out.0, ",\"duration_us\":{micros}}}");
        out.0
    }
}

/// A JSON object's text, written member by member (after the `{`, each
/// member but the first preceded by a comma).
struct Json(String);

impl Json {
    /// `,"name":"value"` (the first member of an object without the
    /// comma).
    fn member(&mut self, name: &str, value: &str) {
        self.name(name);
        self.escaped(value);
    }

    /// A member whose value is text written by `Display`.
    fn member_shown(&mut self, name: &str, value: impl std::fmt::Display) {
        self.name(name);
        self.string(value);
    }

    /// A member whose value is a list of strings.
    fn list<'a>(&mut self, name: &str, items: impl Iterator<Item = &'a str>) {
        self.name(name);
        self.0.push('[');
        for (i, item) in items.enumerate() {
            if i > 0 {
                self.0.push(',');
            }
            self.escaped(item);
        }
        self.0.push(']');
    }

    fn name(&mut self, name: &str) {
        if !self.0.ends_with('{') {
            self.0.push(',');
        }
        self.0.push('"');
        self.0.push_str(name);
        self.0.push_str("\":");
    }

    /// `value`'s text as a JSON string.
    fn string(&mut self, value: impl std::fmt::Display) {
        self.0.push('"');
        let _ = write!(Escaping(&mut self.0), "{value}");
        self.0.push('"');
    }

    /// `value` as a JSON string.
    fn escaped(&mut self, value: &str) {
        self.0.push('"');
        let _ = Escaping(&mut self.0).write_str(value);
        self.0.push('"');
    }
}

/// Writes text into a JSON string: quotes, backslashes and control
/// characters escaped, everything else as it is.
struct Escaping<'a>(&'a mut String);

impl std::fmt::Write for Escaping<'_> {
    fn write_str(&mut self, text: &str) -> std::fmt::Result {
        let mut plain = 0;
        for (at, byte) in text.bytes().enumerate() {
            let escape = match byte {
                b'"' => "\\\"",
                b'\\' => "\\\\",
                b'\n' => "\\n",
                b'\r' => "\\r",
                b'\t' => "\\t",
                0..0x20 => "",
                _ => continue,
            };
            self.0.push_str(&text[plain..at]);
            if escape.is_empty() {
                write!(self.0, "\\u{byte:04x}")?;
            } else {
                self.0.push_str(escape);
            }
            plain = at + 1;
        }
        self.0.push_str(&text[plain..]);
        Ok(())
    }
}

/// The digest of `output`'s text content (its blocks as text, a line
/// feed between two), hashed block by block: a text block is not copied.
fn output_digest(output: &ToolOutput) -> String {
    let parts = output.content.iter().enumerate().flat_map(|(i, block)| {
        let text: Cow<'_, [u8]> = match block {
            ContentBlock::Text(text) => text.as_bytes().into(),
            other => other.to_text().into_bytes().into(),
        };
        [
            Cow::Borrowed(if i > 0 { &b"\n"[..] } else { &[][..] }),
            text,
        ]
    });
    sha256_of(parts)
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

#[cfg(test)]
mod tests {
    use super::*;
    use airlock_core::error::CallError;
    use serde_json::{Value, json};

    /// The record written by hand is JSON, and each text in it reads back
    /// as it was, whatever it holds.
    #[test]
    fn a_record_is_json_whatever_its_texts_hold() {
        let odd =
            "quote \" backslash \\ line\nfeed tab\t nul\u{0} bell\u{7} del\u{7f} é 🦀 \u{2028}";
        let mut result = ToolResult::failed(format!("id {odd}"), format!("tool {odd}"), {
            CallError::internal("x")
        });
        result.duration = std::time::Duration::from_micros(42);
        let caller = Caller {
            subject: format!("subject {odd}"),
            client_id: Some(format!("client {odd}")),
        };
        let grants = CallGrants::nothing(std::time::Duration::ZERO, 0);
        let secrets = Secrets::default();
        let input = json!({ "text": odd }).to_string();
        let record = CallRecord {
            tool: None,
            session: &format!("session {odd}"),
            caller: Some(&caller),
            input: input.clone(),
            keep_input: Some(&secrets),
            grants: &grants,
            result: &result,
        };
        let text = record.fields();
        let fields: Value = serde_json::from_str(&text).expect("the record is JSON");
        assert_eq!(fields["tool"], format!("tool {odd}"));
        assert_eq!(fields["tool_use_id"], format!("id {odd}"));
        assert_eq!(fields["session"], format!("session {odd}"));
        assert_eq!(fields["caller"], format!("subject {odd}"));
        assert_eq!(fields["client"], format!("client {odd}"));
        assert_eq!(fields["input"], input);
        assert_eq!(fields["input_digest"], sha256(input.as_bytes()));
        assert_eq!(fields["decision"], Value::Null);
        assert_eq!(fields["grants"], json!({ "mounts": [] }));
        assert_eq!(fields["result"], "internal");
        assert_eq!(fields["duration_us"], 42);
        assert!(fields.get("origin").is_none() && fields.get("output_digest").is_none());
    }

    /// The output digest hashes the blocks where they lie, and is the
    /// digest of the output's text content, as documented.
    #[test]
    fn the_output_digest_is_that_of_the_text_content() {
        let mut output = ToolOutput::text("first");
        for block in [
            ContentBlock::Json(json!({ "a": [1, "two"] })),
            ContentBlock::Text(String::new()),
            ContentBlock::Text("last\n".into()),
        ] {
            assert_eq!(
                output_digest(&output),
                sha256(output.text_content().as_bytes())
            );
            output.content.push(block);
        }
        assert_eq!(
            output_digest(&output),
            sha256(output.text_content().as_bytes())
        );
        assert_eq!(
            output_digest(&ToolOutput::default()),
            sha256(b""),
            "no blocks"
        );
    }
}
