//! The audit trail as an operator has it: `[audit]` with a key made by
//! `airlock keygen`, calls allowed, denied by a rule and asked and
//! accepted, an approval and an install, each recorded with who decided;
//! `airlock audit verify` holds it, and names the record a hand edited;
//! `airlock audit show` filters it.

use serde_json::Value;
use std::path::Path;

fn run(home: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = crate::command(home, args).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn every_call_and_change_is_in_a_trail_that_verifies_and_shows_tampering() {
    let home = tempfile::tempdir().unwrap();
    let ws = home.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("a.txt"), "hello\n").unwrap();
    let key = home.path().join("keys/audit");
    let (code, _, stderr) = run(home.path(), &["keygen", key.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{stderr}");
    crate::write_config(
        home.path(),
        &format!(
            "workspace = \"{}\"\n[permissions]\ndeny = [\"Read(./secret.txt)\"]\n\
             [audit]\nenabled = true\nkey = \"{}\"\ncheckpoint_every = 3\n",
            ws.display(),
            key.display()
        ),
    );
    let read = serde_json::json!({"file_path": ws.join("a.txt")}).to_string();
    let (code, _, stderr) = run(home.path(), &["call", "read", &read]);
    assert_eq!(code, Some(0), "{stderr}");
    std::fs::write(ws.join("secret.txt"), "s3cret\n").unwrap();
    let secret = serde_json::json!({"file_path": ws.join("secret.txt")}).to_string();
    let (code, _, _) = run(home.path(), &["call", "read", &secret]);
    assert_eq!(code, Some(1), "denied by the rule");
    let write = serde_json::json!({"file_path": ws.join("b.txt"), "content": "new\n"}).to_string();
    let (code, _, stderr) = run(home.path(), &["--yes", "call", "write", &write]);
    assert_eq!(code, Some(0), "{stderr}");
    let (code, _, stderr) = run(home.path(), &["approve", "sleep"]);
    assert_eq!(code, Some(0), "{stderr}");
    let file = home.path().join("patient.wasm");
    std::fs::copy(airlock_tests::guests::PATIENT, &file).unwrap();
    let (code, _, stderr) = run(home.path(), &["install", file.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{stderr}");

    let trail = home.path().join(".local/state/airlock/audit.jsonl");
    let text = std::fs::read_to_string(&trail).unwrap();
    let records: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let call = |tool: &str| {
        records
            .iter()
            .find(|r| r["kind"] == "call" && r["tool"] == tool)
            .unwrap_or_else(|| panic!("no call of {tool} in:\n{text}"))
    };
    assert_eq!(call("read")["decision"], "allow", "{text}");
    assert_eq!(call("read")["result"], "ok");
    assert!(
        call("read")["digest"]
            .as_str()
            .is_some_and(|d| d.len() == 64),
        "the code's digest: {text}"
    );
    assert_eq!(call("read")["grants"]["mounts"][0]["access"], "read-only");
    let denied = records
        .iter()
        .find(|r| r["kind"] == "call" && r["decision"] == "deny")
        .expect(&text);
    assert_eq!(denied["tool"], "read");
    assert_eq!(denied["decided_by"], "rule Read(./secret.txt)");
    assert_eq!(denied["result"], "permission_denied");
    assert_eq!(
        call("write")["decided_by"],
        "user",
        "asked, and accepted: {text}"
    );
    assert_eq!(call("write")["decision"], "allow");
    assert!(
        call("write").get("input").is_none(),
        "inputs are off by default"
    );
    let approval = records
        .iter()
        .find(|r| r["kind"] == "approval")
        .expect(&text);
    assert_eq!(approval["tool"], "sleep");
    assert_eq!(approval["decided_by"], "airlock approve");
    let install = records
        .iter()
        .find(|r| r["kind"] == "install")
        .expect(&text);
    assert_eq!(install["name"], "patient");
    assert!(
        records
            .iter()
            .any(|r| r["kind"] == "checkpoint" && r["signature"].is_string())
    );

    let (code, stdout, stderr) = run(home.path(), &["audit", "verify"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("the audit trail holds"), "{stdout}");
    let (code, stdout, _) = run(home.path(), &["audit", "show", "--decision", "deny"]);
    assert_eq!(code, Some(0));
    assert!(
        stdout.contains("read deny rule Read(./secret.txt) by") && !stdout.contains("read allow"),
        "{stdout}"
    );

    // A hand rewrites the denial as an allow: verify names the record.
    let at = text
        .lines()
        .position(|l| l.contains("\"decision\":\"deny\""))
        .unwrap();
    let edited = text.replacen("\"decision\":\"deny\"", "\"decision\":\"allow\"", 1);
    std::fs::write(&trail, edited).unwrap();
    let (code, _, stderr) = run(home.path(), &["audit", "verify"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("line {} (record {})", at + 1, at + 1))
            && stderr.contains("edited"),
        "{stderr}"
    );
}
