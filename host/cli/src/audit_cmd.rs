//! `airlock audit verify` (the trail's chain and signed checkpoints, read
//! offline: the first record that does not hold, and how much of the tail
//! is unsigned) and `airlock audit show` (the records, filtered, for a
//! person), and [`event`], how the commands that change what runs
//! (`install`, `remove`, `approve`) are recorded. The trail's format is
//! `airlock_audit`'s.

use crate::args::AuditAction;
use airlock_host::Config;
use airlock_host::audit_trail::{self, PublicKey};
use airlock_host::sanitize::{self, Sink};
use serde_json::{Map, Value};
use std::path::PathBuf;
use std::process::ExitCode;

/// Runs `airlock audit ACTION`.
pub(crate) fn run(action: &AuditAction, config: &Config) -> ExitCode {
    match action {
        AuditAction::Verify { files, keys } => verify(files, keys, config),
        AuditAction::Show {
            files,
            tool,
            caller,
            decision,
            kind,
            since,
            json,
        } => {
            let filter = Filter {
                tool: tool.as_deref(),
                caller: caller.as_deref(),
                decision: decision.as_deref(),
                kind: kind.as_deref(),
                since: since.as_deref(),
            };
            show(files, &filter, *json, config)
        }
    }
}

/// The trail's files: those given, else the configured file after the
/// files it was rotated into.
fn trail_files(given: &[PathBuf], config: &Config) -> Result<Vec<PathBuf>, String> {
    if !given.is_empty() {
        return Ok(given.to_vec());
    }
    let path = config.audit.sink_path().ok_or(
        "the configured trail is not a file ([audit] path is `-` or a socket): name the files \
         the collector wrote",
    )?;
    let mut files = audit_trail::rotated_files(&path);
    if path.exists() {
        files.push(path.clone());
    }
    if files.is_empty() {
        return Err(format!(
            "there is no audit trail at {} (is [audit] enabled?)",
            path.display()
        ));
    }
    Ok(files)
}

fn verify(given: &[PathBuf], keys: &[PathBuf], config: &Config) -> ExitCode {
    let files = match trail_files(given, config) {
        Ok(f) => f,
        Err(e) => return crate::author::fail(e),
    };
    let key_files = if keys.is_empty() {
        config.audit.trusted_keys()
    } else {
        keys.to_vec()
    };
    let mut trusted = Vec::new();
    for path in &key_files {
        let key = airlock_host::host_files::read_text_capped(
            path,
            64 << 10,
            airlock_host::host_files::Links::Follow,
        )
        .map_err(|e| e.to_string())
        .and_then(|text| PublicKey::from_pem(&text));
        match key {
            Ok(key) => trusted.push(key),
            Err(e) => return crate::author::fail(format!("key {}: {e}", path.display())),
        }
    }
    let report = match audit_trail::verify(&files, &trusted) {
        Ok(r) => r,
        Err(e) => return crate::author::fail(e),
    };
    let span = match (report.first_seq, report.last_seq) {
        (Some(first), Some(last)) => format!("records {first} to {last}"),
        _ => "no records".to_string(),
    };
    if let Some(problem) = &report.problem {
        eprintln!(
            "airlock: the audit trail does not hold: {}",
            sanitize::clean_capped(&problem.to_string(), Sink::Line, 600)
        );
        eprintln!("  {} records before it verified ({span})", report.records);
        return ExitCode::FAILURE;
    }
    say!(
        "the audit trail holds: {} records ({span}) in {} file(s), {} signed checkpoint(s)",
        report.records,
        files.len(),
        report.signed_checkpoints
    );
    if report.first_seq > Some(1) {
        say!(
            "  it starts at record {}: the files before it were not given",
            report.first_seq.unwrap_or_default()
        );
    }
    if report.unsigned_checkpoints > 0 {
        say!(
            "  {} checkpoint(s) are unsigned ([audit] key was not set when they were written)",
            report.unsigned_checkpoints
        );
    }
    if trusted.is_empty() && report.signed_checkpoints == 0 {
        say!("  no key is trusted (give --key or set [audit] key): signatures were not checked");
    }
    let tail = report.unsigned_tail();
    if tail > 0 {
        say!(
            "  the last {tail} record(s) follow the last signed checkpoint: they could be \
             rewritten unseen by whoever can write the file"
        );
    }
    ExitCode::SUCCESS
}

/// What `show` keeps.
struct Filter<'a> {
    tool: Option<&'a str>,
    caller: Option<&'a str>,
    decision: Option<&'a str>,
    kind: Option<&'a str>,
    since: Option<&'a str>,
}

impl Filter<'_> {
    fn keeps(&self, record: &Value) -> bool {
        let field = |name: &str| record.get(name).and_then(Value::as_str);
        self.tool.is_none_or(|t| field("tool") == Some(t))
            && self.caller.is_none_or(|c| field("caller") == Some(c))
            && self.decision.is_none_or(|d| field("decision") == Some(d))
            && self.kind.is_none_or(|k| field("kind") == Some(k))
            && self
                .since
                .is_none_or(|s| field("time").is_some_and(|t| t >= s))
    }
}

fn show(given: &[PathBuf], filter: &Filter<'_>, json: bool, config: &Config) -> ExitCode {
    let files = match trail_files(given, config) {
        Ok(f) => f,
        Err(e) => return crate::author::fail(e),
    };
    let records = match audit_trail::verify::records(&files) {
        Ok(r) => r,
        Err(e) => return crate::author::fail(e),
    };
    let line = |v: &Value, name: &str| {
        v.get(name)
            .map(|x| match x {
                Value::String(s) => s.clone(),
                Value::Null => "-".into(),
                other => other.to_string(),
            })
            .unwrap_or_else(|| "-".into())
    };
    let mut shown = 0;
    for record in records.iter().filter(|r| filter.keeps(r)) {
        shown += 1;
        let text = if json {
            record.to_string()
        } else {
            let what = match line(record, "kind").as_str() {
                "call" => format!(
                    "{} {} {} by {} -> {} {}us",
                    line(record, "tool"),
                    line(record, "decision"),
                    line(record, "decided_by"),
                    record
                        .get("caller")
                        .and_then(Value::as_str)
                        .unwrap_or_else(|| record
                            .get("session")
                            .and_then(Value::as_str)
                            .unwrap_or("-")),
                    line(record, "result"),
                    line(record, "duration_us"),
                ),
                "checkpoint" => format!(
                    "head {} {}",
                    line(record, "head_seq"),
                    record
                        .get("key")
                        .and_then(Value::as_str)
                        .map_or("unsigned".to_string(), |k| format!("signed by {k}"))
                ),
                _ => {
                    let mut rest: Map<String, Value> =
                        record.as_object().cloned().unwrap_or_default();
                    for k in ["seq", "time", "replica", "kind", "prev", "hash"] {
                        rest.remove(k);
                    }
                    Value::Object(rest).to_string()
                }
            };
            format!(
                "{:>6} {} {:<10} {}",
                line(record, "seq"),
                line(record, "time"),
                line(record, "kind"),
                what
            )
        };
        say!("{}", sanitize::clean_capped(&text, Sink::Line, 2000));
    }
    if shown == 0 {
        eprintln!("airlock: no record matches");
    }
    ExitCode::SUCCESS
}

/// Records `kind` with `fields` in the trail `config` asks for, if any:
/// the record of a command that changed what runs (an install, a removal,
/// an approval). Fails when the trail cannot take it.
pub(crate) fn event(
    config: &Config,
    kind: &'static str,
    fields: Map<String, Value>,
) -> Result<(), String> {
    let log = airlock_host::audit::open(config).map_err(|e| format!("{e:#}"))?;
    let Some(log) = log else {
        return Ok(());
    };
    let recorded = log.record(kind, fields);
    log.close();
    recorded.map_err(|e| format!("the audit trail did not take the record: {e}"))
}

/// `event`, for a result to report: a change done but not recorded is an
/// error that says so.
pub(crate) fn recorded(
    config: &Config,
    kind: &'static str,
    fields: Map<String, Value>,
    done: Result<String, String>,
) -> Result<String, String> {
    let text = done?;
    event(config, kind, fields)
        .map(|()| text.clone())
        .map_err(|e| format!("{text}\nbut it is not in the audit trail: {e}"))
}

/// A record's fields from pairs.
pub(crate) fn fields<const N: usize>(pairs: [(&str, Value); N]) -> Map<String, Value> {
    pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}
