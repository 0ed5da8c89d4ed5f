//! A trail written to real files (and a real Unix socket), then verified:
//! intact, and with a record edited, removed, reordered or inserted, a
//! checkpoint by another key, two writers on one file, rotation, and the
//! sink down under both failure modes.
//!
//! The keys in fixtures/ are test-only P-256 keys made by `openssl genpkey`.

use airlock_audit::{AuditLog, OnFailure, Options, PublicKey, SigningKey, Sink, verify};
use serde_json::{Map, Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;

fn key(name: &str) -> SigningKey {
    let pem = std::fs::read_to_string(format!(
        "{}/tests/fixtures/{name}.pem",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    SigningKey::from_pem(&pem).unwrap()
}

fn public(name: &str) -> PublicKey {
    let pem = std::fs::read_to_string(format!(
        "{}/tests/fixtures/{name}.pub",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    PublicKey::from_pem(&pem).unwrap()
}

fn fields(value: Value) -> Map<String, Value> {
    value.as_object().unwrap().clone()
}

/// A trail of `calls` call records at `path`, signed by the operator's key
/// every 4 records, closed.
fn write_trail(path: &Path, calls: usize) {
    let mut options = Options::new(Sink::File(path.to_path_buf()), "test-replica");
    options.key = Some(key("operator"));
    options.checkpoint_every = 4;
    let log = AuditLog::open(options).unwrap();
    for i in 0..calls {
        log.record("call", fields(json!({"tool": "read", "n": i})))
            .unwrap();
    }
    log.close();
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

fn rewrite(path: &Path, lines: &[String]) {
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

fn problem(path: &Path) -> airlock_audit::Problem {
    let report = verify(&[path.to_path_buf()], &[public("operator")]).unwrap();
    report.problem.expect("a problem is found")
}

#[test]
fn an_intact_trail_verifies_and_its_unsigned_tail_is_counted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    write_trail(&path, 10);
    let report = verify(std::slice::from_ref(&path), &[public("operator")]).unwrap();
    assert_eq!(report.problem, None);
    // start and 10 calls, and a checkpoint at least after every 4 (a batch
    // is checkpointed whole) and at close.
    assert!(report.records >= 12, "{report:?}");
    assert!(report.signed_checkpoints >= 1, "{report:?}");
    assert_eq!(report.unsigned_tail(), 0);
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&path).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);

    // Without its last checkpoint, the records after the one before are unsigned.
    let mut all = lines(&path);
    all.pop();
    rewrite(&path, &all);
    let report = verify(std::slice::from_ref(&path), &[public("operator")]).unwrap();
    assert_eq!(report.problem, None);
    assert!(report.unsigned_tail() >= 1, "{report:?}");
}

#[test]
fn an_edited_removed_reordered_or_inserted_record_is_found_where_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    write_trail(&path, 10);
    let original = lines(&path);

    let mut edited = original.clone();
    edited[3] = edited[3].replace("\"read\"", "\"rm\"");
    rewrite(&path, &edited);
    let p = problem(&path);
    assert_eq!((p.line, p.seq), (4, Some(4)), "{p}");
    assert!(p.what.contains("edited"), "{p}");

    let mut removed = original.clone();
    removed.remove(3);
    rewrite(&path, &removed);
    let p = problem(&path);
    assert_eq!((p.line, p.seq), (4, Some(5)), "{p}");
    assert!(p.what.contains("record 4 is missing"), "{p}");

    let mut reordered = original.clone();
    reordered.swap(3, 4);
    rewrite(&path, &reordered);
    let p = problem(&path);
    assert_eq!(p.line, 4, "{p}");
    assert!(p.what.contains("follows record 3"), "{p}");

    // A forged record that hashes correctly and takes the next seq: the
    // record after it no longer chains to the one before.
    let mut inserted = original.clone();
    let forged: Value = serde_json::from_str(&original[3]).unwrap();
    let mut forged = forged.as_object().unwrap().clone();
    forged.remove("hash");
    forged.insert("tool".into(), "forged".into());
    let body = Value::Object(forged).to_string();
    let hash = airlock_audit::chain::sha256(body.as_bytes());
    inserted[3] = format!("{},\"hash\":\"{hash}\"}}", &body[..body.len() - 1]);
    rewrite(&path, &inserted);
    let p = problem(&path);
    assert_eq!((p.line, p.seq), (5, Some(5)), "{p}");
    assert!(p.what.contains("prev is not the hash"), "{p}");

    rewrite(&path, &original);
    assert_eq!(
        verify(std::slice::from_ref(&path), &[public("operator")])
            .unwrap()
            .problem,
        None
    );
}

#[test]
fn a_checkpoint_signed_by_another_key_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    write_trail(&path, 3);
    let report = verify(std::slice::from_ref(&path), &[public("other")]).unwrap();
    let p = report.problem.expect("refused");
    assert!(p.what.contains("not a trusted key"), "{p}");

    // A whole trail rewritten and signed with another key: its
    // checkpoints do not verify under the operator's.
    let forged = dir.path().join("forged.jsonl");
    let mut options = Options::new(Sink::File(forged.clone()), "test-replica");
    options.key = Some(key("other"));
    let log = AuditLog::open(options).unwrap();
    log.record("call", fields(json!({"tool": "read"}))).unwrap();
    log.close();
    let p = verify(&[forged], &[public("operator")])
        .unwrap()
        .problem
        .unwrap();
    assert!(p.what.contains("not a trusted key"), "{p}");
}

#[test]
fn two_writers_on_one_file_keep_one_chain_and_rotation_keeps_it_across_files() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let open = |name: &str| {
        let mut options = Options::new(Sink::File(path.clone()), name);
        options.key = Some(key("operator"));
        options.max_file_bytes = 4 << 10;
        AuditLog::open(options).unwrap()
    };
    let (a, b) = (open("a"), open("b"));
    for i in 0..60 {
        let log = if i % 3 == 0 { &a } else { &b };
        log.record("call", fields(json!({"n": i}))).unwrap();
        // Each writer writes what it gathered within 100 ms: pauses
        // longer than that make several batches of each, interleaved.
        if i % 15 == 14 {
            std::thread::sleep(Duration::from_millis(150));
        }
    }
    a.close();
    b.close();
    let mut files = airlock_audit::rotated_files(&path);
    assert!(files.len() >= 2, "rotated: {files:?}");
    // The last batch may have rotated the file away too.
    if path.exists() {
        files.push(path.clone());
    }
    let report = verify(&files, &[public("operator")]).unwrap();
    assert_eq!(report.problem, None, "{report:?}");
    assert_eq!(report.first_seq, Some(1));
    assert!(report.records >= 62, "{report:?}");
    // One rotated file missing is a gap in the chain.
    let without: Vec<PathBuf> = files.iter().skip(1).cloned().collect();
    let report = verify(&without, &[public("operator")]).unwrap();
    assert_eq!(report.problem, None, "a trail may start at a later file");
    assert!(report.first_seq > Some(1));
    assert!(files.len() > 2, "three files at least: {files:?}");
    let gap: Vec<PathBuf> = [files[0].clone(), files[files.len() - 1].clone()].to_vec();
    let p = verify(&gap, &[public("operator")])
        .unwrap()
        .problem
        .unwrap();
    assert!(p.what.contains("missing"), "{p}");
}

/// A collector on a Unix socket that goes away: failing closed, calls are
/// refused until it is back and nothing is lost; dropping, calls go on and
/// the trail says how many records it lost.
#[test]
fn a_sink_that_goes_down_fails_calls_or_drops_records_as_configured() {
    use std::io::BufRead;
    use std::os::unix::net::UnixListener;
    for mode in [OnFailure::Fail, OnFailure::Drop] {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("collector.sock");
        let listener = UnixListener::bind(&socket).unwrap();
        let mut options = Options::new(Sink::Unix(socket.clone()), "r");
        options.on_failure = mode;
        options.queue = 8;
        let log = AuditLog::open(options).unwrap();
        let (stream, _) = listener.accept().unwrap();
        let mut reader = std::io::BufReader::new(stream);
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        assert!(line.contains("\"kind\":\"start\""), "{line}");
        // The collector goes away.
        drop(reader);
        drop(listener);
        std::fs::remove_file(&socket).unwrap();
        let mut refused = false;
        for i in 0..200 {
            if log.ready().is_err() {
                refused = true;
                break;
            }
            let _ = log.record("call", fields(json!({"n": i})));
            std::thread::sleep(Duration::from_millis(5));
        }
        match mode {
            OnFailure::Fail => {
                assert!(refused, "calls go on with the trail down");
                let why = log.ready().unwrap_err();
                assert!(why.contains("on_failure is \"fail\""), "{why}");
                // The queue is full: a record is handed back, never waited
                // on, for a caller that must not block to wait elsewhere.
                // (Tried until then: while the writer retries, it holds
                // the queue's records out, and one more fits.)
                let deadline = std::time::Instant::now() + Duration::from_secs(5);
                let back = loop {
                    let tried = std::time::Instant::now();
                    let handed = log.try_record_json("call", "{\"late\":0}".into());
                    assert!(tried.elapsed() < Duration::from_millis(500), "it waited");
                    if let Err(back) = handed {
                        break back;
                    }
                    assert!(std::time::Instant::now() < deadline, "never handed back");
                    std::thread::sleep(Duration::from_millis(5));
                };
                assert_eq!(back.0, "{\"late\":0}");
            }
            OnFailure::Drop => {
                assert!(!refused, "dropping never refuses");
                for i in 0..20 {
                    log.record("call", fields(json!({"late": i}))).unwrap();
                }
            }
        }
        // The collector is back: the writer reconnects.
        let listener = UnixListener::bind(&socket).unwrap();
        let (stream, _) = listener.accept().unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut reader = std::io::BufReader::new(stream);
        let wanted = match mode {
            OnFailure::Fail => "\"kind\":\"call\"",
            OnFailure::Drop => "\"kind\":\"dropped\"",
        };
        let mut text = String::new();
        while !text.contains(wanted) {
            let mut line = String::new();
            reader
                .read_line(&mut line)
                .expect("the writer sends what it kept");
            text.push_str(&line);
        }
        match mode {
            OnFailure::Fail => {
                assert!(text.contains("\"kind\":\"call\""), "{text}");
                assert!(!text.contains("dropped"), "{text}");
                let deadline = std::time::Instant::now() + Duration::from_secs(5);
                while log.ready().is_err() {
                    assert!(std::time::Instant::now() < deadline, "still refused");
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
            OnFailure::Drop => assert!(text.contains("\"kind\":\"dropped\""), "{text}"),
        }
        drop(reader);
        drop(listener);
    }
}
