//! Verifying a trail offline: every line's hash against its bytes, every
//! `prev` against the record before, `seq` counting up by one, and every
//! checkpoint's signature against the trusted keys. The first problem is
//! reported with its file, line and record; the records after the last
//! signed checkpoint are counted as the unsigned tail (what a host with
//! root could still rewrite unseen).

use crate::chain::{self, GENESIS, PublicKey};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Where a trail was found not to hold, and how.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// The file.
    pub file: PathBuf,
    /// The line (from 1).
    pub line: usize,
    /// The record's `seq`, when it could be read.
    pub seq: Option<u64>,
    /// What is wrong.
    pub what: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} line {}", self.file.display(), self.line)?;
        if let Some(seq) = self.seq {
            write!(f, " (record {seq})")?;
        }
        write!(f, ": {}", self.what)
    }
}

/// What [`verify`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Records read before the end or the first problem.
    pub records: u64,
    /// The first record's `seq` (above 1 when older files were not given).
    pub first_seq: Option<u64>,
    /// The last record's `seq`.
    pub last_seq: Option<u64>,
    /// Checkpoints whose signature verified.
    pub signed_checkpoints: u64,
    /// Checkpoints without a signature (no key was configured).
    pub unsigned_checkpoints: u64,
    /// The `seq` of the last record a verified signature covers.
    pub signed_through: Option<u64>,
    /// The first problem, if any.
    pub problem: Option<Problem>,
}

impl Report {
    /// How many records follow the last signed checkpoint.
    pub fn unsigned_tail(&self) -> u64 {
        match (self.last_seq, self.signed_through, self.first_seq) {
            (Some(last), Some(signed), _) => last - signed,
            (Some(last), None, Some(first)) => last - first + 1,
            _ => 0,
        }
    }
}

/// The files `path` was rotated into (`PATH.SEQ`), oldest first.
pub fn rotated_files(path: &Path) -> Vec<PathBuf> {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Vec::new();
    };
    let prefix = format!("{}.", name.to_string_lossy());
    let mut found: Vec<PathBuf> = std::fs::read_dir(if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    })
    .into_iter()
    .flatten()
    .filter_map(Result::ok)
    .filter(|e| {
        e.file_name()
            .to_str()
            .and_then(|n| n.strip_prefix(&prefix))
            .is_some_and(|rest| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit()))
    })
    .map(|e| dir.join(e.file_name()))
    .collect();
    found.sort();
    found
}

/// Verifies the trail in `files` (in order: rotated files first), the
/// checkpoints against `keys`.
pub fn verify(files: &[PathBuf], keys: &[PublicKey]) -> Result<Report, String> {
    let mut report = Report::default();
    let mut prev: Option<String> = None;
    for file in files {
        let text =
            std::fs::read(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        let text = String::from_utf8_lossy(&text);
        for (at, line) in text.split_terminator('\n').enumerate() {
            let problem = |seq: Option<u64>, what: String| Problem {
                file: file.clone(),
                line: at + 1,
                seq,
                what,
            };
            let value: Value = match serde_json::from_str(line) {
                Ok(v) => v,
                Err(e) => {
                    report.problem = Some(problem(
                        None,
                        format!("it is not a record ({e}): cut short, or edited"),
                    ));
                    return Ok(report);
                }
            };
            let seq = value.get("seq").and_then(Value::as_u64);
            let claimed = match chain::unseal(line) {
                Ok((hash, true)) => hash,
                Ok((_, false)) => {
                    report.problem = Some(problem(
                        seq,
                        "its hash is not the hash of its contents: it was edited".into(),
                    ));
                    return Ok(report);
                }
                Err(why) => {
                    report.problem = Some(problem(seq, format!("{why}: it was edited")));
                    return Ok(report);
                }
            };
            let (Some(seq), Some(its_prev)) = (seq, value.get("prev").and_then(Value::as_str))
            else {
                report.problem = Some(problem(seq, "it has no seq or prev".into()));
                return Ok(report);
            };
            match (report.last_seq, &prev) {
                (Some(last), Some(prev)) => {
                    if seq != last + 1 {
                        let what = if seq <= last {
                            format!(
                                "record {seq} follows record {last}: records were reordered, or one was repeated"
                            )
                        } else {
                            format!(
                                "record {seq} follows record {last}: {} missing",
                                if seq == last + 2 {
                                    format!("record {} is", last + 1)
                                } else {
                                    format!("records {} to {} are", last + 1, seq - 1)
                                }
                            )
                        };
                        report.problem = Some(problem(Some(seq), what));
                        return Ok(report);
                    }
                    if its_prev != prev {
                        report.problem = Some(problem(
                            Some(seq),
                            "its prev is not the hash of the record before it: a record \
                             before it was inserted, removed or rewritten"
                                .into(),
                        ));
                        return Ok(report);
                    }
                }
                _ => {
                    if its_prev == GENESIS && seq != 1 {
                        report.problem = Some(problem(
                            Some(seq),
                            "it starts a trail but is not record 1".into(),
                        ));
                        return Ok(report);
                    }
                    report.first_seq = Some(seq);
                }
            }
            if value.get("kind").and_then(Value::as_str) == Some("checkpoint") {
                let head = value.get("head").and_then(Value::as_str);
                let head_seq = value.get("head_seq").and_then(Value::as_u64);
                if head != Some(its_prev) || head_seq != Some(seq - 1) {
                    report.problem = Some(problem(
                        Some(seq),
                        "the checkpoint's head is not the record before it".into(),
                    ));
                    return Ok(report);
                }
                match (
                    value.get("key").and_then(Value::as_str),
                    value.get("signature").and_then(Value::as_str),
                ) {
                    (Some(fingerprint), Some(signature)) => {
                        let Some(key) = keys.iter().find(|k| k.fingerprint() == fingerprint) else {
                            report.problem = Some(problem(
                                Some(seq),
                                format!(
                                    "the checkpoint is signed by {fingerprint}, which is not a \
                                     trusted key"
                                ),
                            ));
                            return Ok(report);
                        };
                        let message = chain::checkpoint_message(its_prev, seq - 1);
                        if !key.verifies(&message, signature) {
                            report.problem = Some(problem(
                                Some(seq),
                                format!(
                                    "the checkpoint's signature does not verify with {fingerprint}"
                                ),
                            ));
                            return Ok(report);
                        }
                        report.signed_checkpoints += 1;
                        report.signed_through = Some(seq);
                    }
                    _ => report.unsigned_checkpoints += 1,
                }
            }
            report.records += 1;
            report.last_seq = Some(seq);
            prev = Some(claimed);
        }
    }
    Ok(report)
}

/// Every record of `files`, in order; a line that is not JSON is skipped
/// (`verify` reports it).
pub fn records(files: &[PathBuf]) -> Result<Vec<Value>, String> {
    let mut all = Vec::new();
    for file in files {
        let text =
            std::fs::read(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        all.extend(
            String::from_utf8_lossy(&text)
                .split_terminator('\n')
                .filter_map(|line| serde_json::from_str::<Value>(line).ok()),
        );
    }
    Ok(all)
}
