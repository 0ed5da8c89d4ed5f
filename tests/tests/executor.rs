//! The streaming executor: scheduling properties over random batches
//! (proptest), sibling abort, the user's interrupt mid-stream with both
//! interrupt behaviours on real components, a tool's log lines before
//! its result, and a call run where it is read not waking its own task.

use airlock_host::PermissionMode;
use airlock_host::{
    Airlock, Engine, ErrorClass, Executor, ExecutorEvent, Grants, Registry, Submit, ToolResult,
    ToolUse, UseEvents,
};
use airlock_host::{InterruptBehavior, SafetyFlags};
use airlock_tests::fake::{FakeTool, Run};
use airlock_tests::*;
use proptest::prelude::*;
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A host whose tools are native fakes: `fake` (concurrency-safe unless the
/// input says `"exclusive": true`), `reader` (concurrency-safe), `writer`
/// (exclusive), `fragile` (exclusive, cancels siblings on error),
/// `fragile_reader` (concurrency-safe, cancels siblings) and `stubborn`
/// (concurrency-safe, block on interrupt).
async fn fake_host(log: Arc<Mutex<Vec<Run>>>) -> Airlock {
    let mut config = config();
    config.permissions.default_mode = PermissionMode::BypassPermissions;
    let grants = Arc::new(Grants::from_config(&config).unwrap());
    let engine = Engine::new(&config.limits).unwrap();
    let mut registry = Registry::new();
    let cs = SafetyFlags::READ_ONLY | SafetyFlags::CONCURRENCY_SAFE;
    let siblings = SafetyFlags::CANCELS_SIBLINGS_ON_ERROR;
    for (name, flags, interrupt) in [
        ("reader", cs, InterruptBehavior::Cancel),
        ("writer", SafetyFlags::empty(), InterruptBehavior::Cancel),
        ("fragile", siblings, InterruptBehavior::Cancel),
        ("fragile_reader", cs | siblings, InterruptBehavior::Cancel),
        ("stubborn", cs, InterruptBehavior::Block),
    ] {
        let tool = FakeTool::new(name, flags, interrupt, log.clone());
        registry
            .add(Arc::new(tool), grants.for_tool(name).unwrap())
            .unwrap();
    }
    let fake = FakeTool::new(
        "fake",
        SafetyFlags::empty(),
        InterruptBehavior::Cancel,
        log.clone(),
    )
    .classified_by_input();
    registry
        .add(Arc::new(fake), grants.for_tool("fake").unwrap())
        .unwrap();
    Airlock::from_parts(config, engine, grants, registry)
        .await
        .unwrap()
}

/// One planned use: which tool, how long, and the gap before the next.
#[derive(Clone, Debug)]
struct Planned {
    exclusive: bool,
    ms: u64,
    gap_ms: u64,
}

fn planned() -> impl Strategy<Value = Planned> {
    (any::<bool>(), 0u64..25, 0u64..8).prop_map(|(exclusive, ms, gap_ms)| Planned {
        exclusive,
        ms,
        gap_ms,
    })
}

/// How a planned batch is fed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Feed {
    /// One model message.
    Batch,
    /// A session's independent requests, read from the executor's events.
    Session,
    /// A session's requests, each submitted and read from its own events by
    /// a task of its own (as the MCP server does): a concurrency-safe use
    /// that may start at once runs in that task, unless it was submitted
    /// to be scheduled (every other use here, as the MCP server does for a
    /// call with more behind it); and every third is held until its
    /// events are dropped (as the MCP server does until its reply is
    /// written).
    Submitted,
}

/// Runs `batch` as `feed` says: the results' ids, the started ids, and the
/// runs the tool saw.
async fn run_batch(batch: &[Planned], feed: Feed) -> (Vec<String>, Vec<String>, Vec<Run>) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let airlock = fake_host(log.clone()).await;
    let executor = if feed == Feed::Batch {
        airlock.executor(airlock.context())
    } else {
        Executor::session(airlock.clone(), airlock.context())
    };
    let ids: Vec<String> = (0..batch.len()).map(|i| format!("u{i}")).collect();
    let submitted = Arc::new(Mutex::new(Vec::new()));
    let feeder = {
        let batch = batch.to_vec();
        let ids = ids.clone();
        let submitted = submitted.clone();
        async move {
            let mut readers = Vec::new();
            for (i, (p, id)) in batch.iter().zip(&ids).enumerate() {
                let tool_use = ToolUse::new(
                    id.clone(),
                    "fake",
                    json!({"ms": p.ms, "exclusive": p.exclusive}),
                );
                if feed == Feed::Submitted {
                    let how = if i % 2 == 0 {
                        Submit::default()
                    } else {
                        Submit::default().scheduled()
                    };
                    let how = if i % 3 == 0 { how.held() } else { how };
                    let mut events = executor.handle().submit_with(tool_use, how);
                    let submitted = submitted.clone();
                    readers.push(tokio::spawn(async move {
                        let mut results = Vec::new();
                        while let Some(event) = events.next().await {
                            if let ExecutorEvent::Result(r) = event {
                                assert!(r.outcome.is_ok(), "{}: {:?}", r.id, r.outcome);
                                results.push(r.id.clone());
                            }
                        }
                        submitted.lock().unwrap().extend(results);
                    }));
                } else {
                    executor.add(tool_use);
                }
                tokio::time::sleep(Duration::from_millis(p.gap_ms)).await;
            }
            executor.close();
            (executor, readers)
        }
    };
    let (mut executor, readers) = feeder.await;
    let mut results = Vec::new();
    let mut started = Vec::new();
    while let Some(event) = executor.next().await {
        match event {
            ExecutorEvent::Result(r) => {
                assert!(r.outcome.is_ok(), "{}: {:?}", r.id, r.outcome);
                results.push(r.id.clone());
            }
            ExecutorEvent::Started { tool_use_id, .. } => started.push(tool_use_id),
            _ => {}
        }
    }
    for reader in readers {
        reader.await.expect("a reader");
    }
    results.extend(submitted.lock().unwrap().drain(..));
    let runs = log.lock().unwrap().clone();
    (results, started, runs)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    #[test]
    fn scheduling_keeps_its_invariants(batch in proptest::collection::vec(planned(), 1..10)) {
        check_invariants(&batch, Feed::Batch)?;
    }

    #[test]
    fn a_session_keeps_them_and_hands_out_each_result_once(
        batch in proptest::collection::vec(planned(), 1..10)
    ) {
        check_invariants(&batch, Feed::Session)?;
    }

    #[test]
    fn submitted_uses_keep_them_where_they_run_in_their_readers_tasks(
        batch in proptest::collection::vec(planned(), 1..10)
    ) {
        check_invariants(&batch, Feed::Submitted)?;
    }
}

/// The executor's invariants over `batch`: one result per use (in arrival
/// order in a batch; a session hands each out when done), starts in arrival
/// order, no exclusive call beside another, and every call sees the last
/// exclusive call's context change before it.
fn check_invariants(batch: &[Planned], feed: Feed) -> Result<(), TestCaseError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let (mut results, started, runs) = rt.block_on(run_batch(batch, feed));
    let ids: Vec<String> = (0..batch.len()).map(|i| format!("u{i}")).collect();

    if feed != Feed::Batch {
        results.sort_by_key(|id| id[1..].parse::<usize>().unwrap());
    }
    prop_assert_eq!(&results, &ids);
    prop_assert_eq!(&started, &ids);
    prop_assert_eq!(runs.len(), batch.len());

    for a in &runs {
        for b in &runs {
            if a.id != b.id && (!a.concurrency_safe || !b.concurrency_safe) {
                prop_assert!(
                    a.end <= b.start || b.end <= a.start,
                    "{} and {} overlap",
                    a.id,
                    b.id
                );
            }
        }
    }

    for run in &runs {
        let index: usize = run.id[1..].parse().unwrap();
        let last_exclusive = (0..index)
            .rev()
            .find(|&j| batch[j].exclusive)
            .map(|j| format!("u{j}"));
        prop_assert_eq!(
            &run.saw_last,
            &last_exclusive,
            "{} saw the wrong context",
            run.id
        );
    }
    Ok(())
}

#[tokio::test]
async fn a_failing_sibling_cancels_the_rest_of_the_batch() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let airlock = fake_host(log.clone()).await;
    let cx = airlock.context();
    let abort = cx.abort_handle().clone();
    let executor = airlock.executor(cx);
    executor.add(ToolUse::new("slow", "reader", json!({"ms": 2000})));
    executor.add(ToolUse::new(
        "boom",
        "fragile_reader",
        json!({"ms": 20, "fail": true}),
    ));
    executor.add(ToolUse::new("queued", "writer", json!({"ms": 10})));
    executor.close();
    let started = Instant::now();
    let (results, cx) = executor.finish().await;
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "the slow sibling was stopped"
    );
    let summary: Vec<(String, Option<ErrorClass>, String)> = results
        .iter()
        .map(|r| {
            (
                r.id.clone(),
                r.outcome.as_ref().err().map(|e| e.class.clone()),
                r.text(),
            )
        })
        .collect();
    assert_eq!(summary[0].0, "slow");
    assert_eq!(summary[0].1, Some(ErrorClass::Cancelled));
    assert_eq!(
        summary[0].2,
        "cancelled: a sibling failed (fragile_reader (boom))"
    );
    assert_eq!(
        summary[1],
        (
            "boom".into(),
            Some(ErrorClass::ToolError),
            "failed on purpose".into()
        )
    );
    assert_eq!(summary[2].1, Some(ErrorClass::Cancelled));
    assert!(summary[2].2.starts_with("cancelled: a sibling failed"));
    assert!(
        !abort.is_cancelled(),
        "the parent stays alive so the model sees the error"
    );
    assert!(
        log.lock().unwrap().iter().all(|r| r.id != "queued"),
        "the queued sibling never ran"
    );
    assert!(!cx.abort_handle().is_cancelled());
}

#[tokio::test]
async fn errors_from_other_tools_do_not_cancel_siblings() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let airlock = fake_host(log).await;
    let executor = airlock.executor(airlock.context());
    executor.add(ToolUse::new("a", "reader", json!({"ms": 50, "fail": true})));
    executor.add(ToolUse::new("b", "reader", json!({"ms": 100})));
    executor.add(ToolUse::new("c", "nonexistent", json!({})));
    let (results, _) = executor.finish().await;
    assert!(results[0].is_error());
    assert!(!results[1].is_error());
    assert_eq!(
        results[2].outcome.as_ref().unwrap_err().class,
        ErrorClass::UnknownTool
    );
}

#[tokio::test]
async fn an_exclusive_calls_change_is_seen_by_every_later_call() {
    let ws = workspace(&[("sub/f.txt", "hello")]);
    let airlock = airlock(workspace_config(ws.path())).await;
    let airlock = airlock
        .with_config({
            let mut c = workspace_config(ws.path());
            c.permissions.default_mode = PermissionMode::AcceptEdits;
            c
        })
        .await
        .unwrap();
    let executor = airlock.executor(airlock.context());
    executor.add(ToolUse::new("1", "read", json!({"file_path": "sub/f.txt"})));
    executor.add(ToolUse::new("2", "cd", json!({"path": "sub"})));
    executor.add(ToolUse::new("3", "read", json!({"file_path": "f.txt"})));
    executor.add(ToolUse::new("4", "ls", json!({})));
    let (results, cx) = executor.finish().await;
    for r in &results {
        assert!(!r.is_error(), "{}: {}", r.id, r.text());
    }
    assert!(results[2].text().contains("hello"));
    assert!(results[3].text().starts_with(&path_in(ws.path(), "sub/")));
    assert_eq!(cx.cwd(), path_in(ws.path(), "sub"));
}

/// The user's interrupt, mid-stream: the spinning guest (interrupt
/// `cancel`) stops within a tick, the patient one (`block`) finishes,
/// the queued call and a call added afterwards are cancelled by user.
#[tokio::test]
async fn an_interrupt_mid_stream_respects_interrupt_behaviour() {
    let ws = workspace(&[]);
    let dir = tempfile::tempdir().unwrap();
    for wasm in [guests::HOSTILE, guests::PATIENT] {
        let path = std::path::Path::new(wasm);
        std::fs::copy(path, dir.path().join(path.file_name().unwrap())).unwrap();
    }
    let mut config = workspace_config(ws.path());
    config.tool_dirs = Some(vec![dir.path().to_path_buf()]);
    config.permissions.default_mode = PermissionMode::BypassPermissions;
    let airlock = Airlock::new(config).await.unwrap();
    let mut executor = airlock.executor(airlock.context());
    executor.add(ToolUse::new("patient", "patient", json!({"ms": 1500})));
    executor.add(ToolUse::new("spin", "hostile", json!({"attack": "loop"})));
    executor.add(ToolUse::new("queued", "cd", json!({"path": "."})));
    let mut interrupted_at = None;
    let mut finished = std::collections::HashMap::new();
    let mut running = std::collections::HashSet::new();
    let mut results = Vec::new();
    let started = Instant::now();
    // The interrupt comes 100 ms after both calls are running (however
    // long a busy machine took to start them), well inside the patient
    // one's 1.5 s.
    let mut interrupt_at = None;
    loop {
        let event = tokio::select! {
            e = executor.next() => e,
            () = tokio::time::sleep_until(interrupt_at.unwrap_or_else(tokio::time::Instant::now)),
                if interrupt_at.is_some() && interrupted_at.is_none() => {
                executor.interrupt();
                interrupted_at = Some(Instant::now());
                executor.add(ToolUse::new("late", "hostile", json!({"attack": "ok"})));
                executor.close();
                continue;
            }
        };
        let Some(event) = event else { break };
        match event {
            ExecutorEvent::Started { tool_use_id, .. } => {
                running.insert(tool_use_id);
                if running.len() == 2 {
                    interrupt_at = Some(tokio::time::Instant::now() + Duration::from_millis(100));
                }
            }
            ExecutorEvent::Finished { tool_use_id, .. } => {
                finished.insert(tool_use_id, Instant::now());
            }
            ExecutorEvent::Result(r) => results.push(*r),
            _ => {}
        }
    }
    let interrupted_at = interrupted_at.unwrap();
    let ids: Vec<&str> = results.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(
        ids,
        ["patient", "spin", "queued", "late"],
        "one result each, in order"
    );

    assert_eq!(
        results[0].text(),
        "finished; cancelled seen: true",
        "block tools finish"
    );
    assert!(started.elapsed() >= Duration::from_millis(1500));

    let spin = results[1].outcome.as_ref().unwrap_err();
    assert_eq!(spin.class, ErrorClass::Cancelled);
    assert_eq!(spin.message, "cancelled by user");
    let stop_latency = finished["spin"] - interrupted_at;
    assert!(
        stop_latency < Duration::from_millis(100),
        "stopped in {stop_latency:?}"
    );

    for r in &results[2..] {
        assert_eq!(
            r.outcome.as_ref().unwrap_err().message,
            "cancelled by user",
            "{}",
            r.id
        );
    }
}

/// The next result from `executor`, skipping other events.
async fn next_result(executor: &mut airlock_host::Executor) -> airlock_host::ToolResult {
    loop {
        match executor.next().await.expect("the executor is open") {
            ExecutorEvent::Result(r) => return *r,
            _ => continue,
        }
    }
}

#[tokio::test]
async fn a_session_hands_out_each_result_when_done_and_a_failure_cancels_nothing() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let airlock = fake_host(log).await;
    let mut executor = airlock_host::Executor::session(airlock.clone(), airlock.context());
    executor.add(ToolUse::new("slow", "reader", json!({"ms": 400})));
    executor.add(ToolUse::new(
        "boom",
        "fragile_reader",
        json!({"ms": 10, "fail": true}),
    ));
    executor.add(ToolUse::new("fast", "reader", json!({"ms": 50})));
    let first = next_result(&mut executor).await;
    assert_eq!(first.id, "boom");
    assert_eq!(
        first.outcome.unwrap_err().class,
        ErrorClass::ToolError,
        "its own failure"
    );
    assert_eq!(next_result(&mut executor).await.id, "fast");
    let slow = next_result(&mut executor).await;
    assert_eq!(slow.id, "slow");
    assert!(!slow.is_error(), "a failure cancels no other request");
    executor.add(ToolUse::new("later", "writer", json!({"ms": 1})));
    assert!(!next_result(&mut executor).await.is_error());
    executor.close();
    assert!(executor.next().await.is_none(), "closed and drained");
}

#[tokio::test]
async fn cancelling_one_use_answers_it_at_once_or_stops_it() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let airlock = fake_host(log.clone()).await;
    let mut executor = airlock_host::Executor::session(airlock.clone(), airlock.context());
    let started = Instant::now();
    executor.add(ToolUse::new("long", "writer", json!({"ms": 5000})));
    executor.add(ToolUse::new("waiting", "reader", json!({"ms": 1})));
    executor.add(ToolUse::new("other", "reader", json!({"ms": 1})));
    tokio::time::sleep(Duration::from_millis(100)).await;
    executor.cancel("waiting");
    let waiting = next_result(&mut executor).await;
    assert_eq!(waiting.id, "waiting");
    let error = waiting.outcome.unwrap_err();
    assert_eq!(error.class, ErrorClass::Cancelled);
    assert_eq!(error.message, "cancelled by the caller");
    executor.cancel("long");
    let long = next_result(&mut executor).await;
    assert_eq!(long.id, "long");
    assert_eq!(long.outcome.unwrap_err().class, ErrorClass::Cancelled);
    assert!(started.elapsed() < Duration::from_secs(2), "stopped early");
    let other = next_result(&mut executor).await;
    assert_eq!(other.id, "other");
    assert!(!other.is_error(), "the rest runs on");
    executor.cancel("other");
    executor.cancel("no such use");
    executor.close();
    assert!(executor.next().await.is_none());
    assert!(
        log.lock().unwrap().iter().all(|r| r.id != "waiting"),
        "the cancelled use never ran"
    );
}

/// A submitted use's result (its other events passed over).
async fn result_of(events: &mut UseEvents) -> Box<ToolResult> {
    loop {
        match events.next().await {
            Some(ExecutorEvent::Result(r)) => return r,
            Some(_) => {}
            None => panic!("no result"),
        }
    }
}

/// A submitted use whose reader goes away still runs to its end, in a
/// task of its own, and an exclusive use submitted after it starts once it
/// is done (nothing is left counted as running).
#[tokio::test]
async fn a_submitted_use_dropped_unread_still_finishes_before_the_next_exclusive_one() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let airlock = fake_host(log.clone()).await;
    let executor = Executor::session(airlock.clone(), airlock.context());
    let handle = executor.handle();
    drop(handle.submit(ToolUse::new("r", "stubborn", json!({"ms": 100}))));
    let mut write = handle.submit(ToolUse::new("w", "writer", json!({"ms": 0})));
    let result = tokio::time::timeout(Duration::from_secs(10), result_of(&mut write))
        .await
        .expect("the exclusive use starts once the dropped one is done");
    assert!(!result.is_error(), "{}", result.text());
    let runs = log.lock().unwrap().clone();
    let [r, w] = &runs[..] else {
        panic!("two runs: {runs:?}")
    };
    assert_eq!((r.id.as_str(), r.cancelled), ("r", false));
    assert!(
        r.end <= w.start,
        "the exclusive use started beside the other"
    );
    let (_, cx) = executor.finish().await;
    assert_eq!(cx.state_of("writer").map(|s| s.len()), Some(1));
}

/// A held use keeps its place until its events are dropped, not only
/// until its result is read: an exclusive use submitted after it starts
/// only then, wherever the held one ran (in its reader's task, or
/// scheduled). A front end writes the held result out before dropping
/// them, so the exclusive use's result can never be written first.
#[tokio::test]
async fn a_held_use_keeps_its_place_until_its_events_are_dropped() {
    for how in [
        Submit::default().held(),
        Submit::default().scheduled().held(),
    ] {
        let log = Arc::new(Mutex::new(Vec::new()));
        let airlock = fake_host(log.clone()).await;
        let executor = Executor::session(airlock.clone(), airlock.context());
        let handle = executor.handle();
        let mut read = handle.submit_with(ToolUse::new("r", "reader", json!({"ms": 0})), how);
        let result = result_of(&mut read).await;
        assert!(!result.is_error(), "{how:?}: {}", result.text());
        let mut write = handle.submit(ToolUse::new("w", "writer", json!({"ms": 0})));
        let early = tokio::time::timeout(Duration::from_millis(300), write.next()).await;
        assert!(
            early.is_err(),
            "{how:?}: the exclusive use ran while the held one's events were kept: {early:?}"
        );
        let released = Instant::now();
        drop(read);
        let result = tokio::time::timeout(Duration::from_secs(10), result_of(&mut write))
            .await
            .expect("the exclusive use starts once the held events are dropped");
        assert!(!result.is_error(), "{how:?}: {}", result.text());
        let runs = log.lock().unwrap().clone();
        let [_, w] = &runs[..] else {
            panic!("two runs: {runs:?}")
        };
        assert!(w.start >= released, "{how:?}: started before the release");
    }
}

/// A use submitted to be scheduled runs whether or not its events are
/// read (one submitted to run where it is read waits for its reader).
#[tokio::test]
async fn a_use_submitted_to_be_scheduled_runs_before_its_events_are_read() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let airlock = fake_host(log.clone()).await;
    let executor = Executor::session(airlock.clone(), airlock.context());
    let mut events = executor.handle().submit_with(
        ToolUse::new("r", "reader", json!({"ms": 0})),
        Submit::default().scheduled(),
    );
    let ran = tokio::time::timeout(Duration::from_secs(10), async {
        while log.lock().unwrap().is_empty() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(
        ran.is_ok(),
        "the use did not run until its events were read"
    );
    let result = result_of(&mut events).await;
    assert!(!result.is_error(), "{}", result.text());
    assert_eq!(log.lock().unwrap().len(), 1, "it ran once");
}

#[tokio::test]
async fn a_refresh_gives_later_uses_the_new_tools() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let full = fake_host(log).await;
    let readers_only = full.view(|d| d.name == "reader");
    let mut executor =
        airlock_host::Executor::session(readers_only.clone(), readers_only.context());
    executor.add(ToolUse::new("before", "writer", json!({"ms": 1})));
    let before = next_result(&mut executor).await;
    assert_eq!(before.outcome.unwrap_err().class, ErrorClass::UnknownTool);
    executor.handle().refresh(full);
    executor.add(ToolUse::new("after", "writer", json!({"ms": 1})));
    let after = next_result(&mut executor).await;
    assert!(!after.is_error(), "{after:?}");
    let cx = {
        executor.close();
        executor.into_context().await
    };
    assert!(
        cx.tools().get("writer").is_some(),
        "the context sees them too"
    );
}

/// A tool's log lines come out as `Log` events (sanitised, with its level
/// and name) in the order it logged them, every one before its use's
/// result, in a batch and in a session, with uses running side by side.
#[tokio::test]
async fn log_lines_come_out_in_order_before_their_uses_result() {
    use airlock_host::Executor;
    use airlock_host::tool::LogLevel;
    use std::collections::{HashMap, HashSet};
    let (airlock, _dir) = with_component(guests::LOGGER, config()).await;
    let levels = [
        ("trace", LogLevel::Trace),
        ("debug", LogLevel::Debug),
        ("info", LogLevel::Info),
        ("warn", LogLevel::Warn),
        ("error", LogLevel::Error),
    ];
    let lines: Vec<_> = (0..50)
        .map(|i| json!({"level": levels[i % 5].0, "message": format!("line {i}\u{1b}[31m!")}))
        .collect();
    for session in [false, true] {
        let cx = airlock.context();
        let mut executor = if session {
            Executor::session(airlock.clone(), cx)
        } else {
            airlock.executor(cx)
        };
        for k in 0..8 {
            executor.add(ToolUse::new(
                format!("u{k}"),
                "logger",
                json!({"lines": lines}),
            ));
        }
        executor.close();
        let mut logged: HashMap<String, Vec<_>> = HashMap::new();
        let mut done = HashSet::new();
        while let Some(event) = executor.next().await {
            match event {
                ExecutorEvent::Log(line) => {
                    assert!(
                        !done.contains(&line.tool_use_id),
                        "a line after its result: {line:?}"
                    );
                    logged
                        .entry(line.tool_use_id.clone())
                        .or_default()
                        .push(line);
                }
                ExecutorEvent::Result(r) => {
                    assert!(!r.is_error(), "{}", r.text());
                    let got = logged.remove(&r.id).unwrap_or_default();
                    assert_eq!(got.len(), 50, "session {session}, {}", r.id);
                    for (i, line) in got.iter().enumerate() {
                        assert_eq!(line.message, format!("line {i}!"));
                        assert_eq!(
                            (line.tool.as_str(), line.level),
                            ("logger", levels[i % 5].1)
                        );
                    }
                    done.insert(r.id.clone());
                }
                _ => {}
            }
        }
        assert_eq!(done.len(), 8, "session {session}");
    }
}

#[tokio::test]
async fn a_submitted_use_gets_its_own_lines_then_its_result_and_nothing_else() {
    use airlock_host::Executor;
    let (airlock, _dir) = with_component(guests::LOGGER, config()).await;
    let lines: Vec<_> = (0..50)
        .map(|i| json!({"level": "info", "message": format!("line {i}")}))
        .collect();
    let mut executor = Executor::session(airlock.clone(), airlock.context());
    let handle = executor.handle();
    let readers: Vec<_> = (0..8)
        .map(|k| {
            let id = format!("s{k}");
            let mut events = handle.submit(ToolUse::new(&id, "logger", json!({"lines": lines})));
            tokio::spawn(async move {
                let mut got = Vec::new();
                while let Some(event) = events.next().await {
                    got.push(event);
                }
                (id, got)
            })
        })
        .collect();
    executor.add(ToolUse::new("plain", "logger", json!({"lines": lines})));
    executor.close();
    drop(handle);
    for reader in readers {
        let (id, got) = reader.await.expect("the reader");
        assert_eq!(got.len(), 51, "{id}: 50 lines and the result");
        for (i, event) in got.iter().enumerate() {
            match event {
                ExecutorEvent::Log(line) if i < 50 => {
                    assert_eq!(
                        (line.tool_use_id.as_str(), line.message.as_str()),
                        (id.as_str(), format!("line {i}").as_str())
                    );
                }
                ExecutorEvent::Result(r) if i == 50 => {
                    assert_eq!(r.id, id);
                    assert!(!r.is_error(), "{}", r.text());
                }
                other => panic!("{id}: event {i} is {other:?}"),
            }
        }
    }
    let (mut lines_seen, mut results) = (0, Vec::new());
    while let Some(event) = executor.next().await {
        match event {
            ExecutorEvent::Log(line) => {
                assert_eq!(line.tool_use_id, "plain");
                lines_seen += 1;
            }
            ExecutorEvent::Result(r) => results.push(r.id.clone()),
            _ => {}
        }
    }
    assert_eq!((lines_seen, results), (50, vec!["plain".to_string()]));
}

/// A use that may start at once runs where its events are read; a real
/// component's call runs there without its reader's task waking itself.
/// Tokio takes a task that woke itself while it ran for one that yielded,
/// and wakes another worker to take it: wasmtime's report of a call's
/// end, and the closing of the use's progress channels, each did that on
/// every call. (An epoch tick during a call makes the guest yield,
/// which is a wake-up of its own task too, so a few are allowed.)
#[tokio::test]
async fn a_use_run_where_it_is_read_does_not_wake_its_own_task() {
    let airlock = airlock(config()).await;
    let executor = Executor::session(airlock.clone(), airlock.context());
    let handle = executor.handle();
    let mut woke_itself = 0;
    for n in 0..20 {
        let mut events = handle.submit(ToolUse::new(format!("u{n}"), "sleep", json!({"ms": 0})));
        let (result, wakes) = self_wakes(result_of(&mut events)).await;
        assert!(!result.is_error(), "{}", result.text());
        woke_itself += wakes;
    }
    assert!(
        woke_itself <= 3,
        "20 calls woke their own task {woke_itself} times"
    );
}

/// Runs `fut`, counting the polls during which it woke its own task
/// (whatever the poll returned: a task that goes on to wait for something
/// else after `fut`, as one that writes out a reply does, then yields).
async fn self_wakes<F: Future>(fut: F) -> (F::Output, usize) {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::task::{Context, Wake, Waker};
    struct Noting {
        outer: Mutex<Option<Waker>>,
        woken: AtomicBool,
    }
    impl Wake for Noting {
        fn wake(self: Arc<Self>) {
            self.woken.store(true, Ordering::SeqCst);
            if let Some(outer) = self.outer.lock().unwrap().as_ref() {
                outer.wake_by_ref();
            }
        }
    }
    let noting = Arc::new(Noting {
        outer: Mutex::new(None),
        woken: AtomicBool::new(false),
    });
    let waker = Waker::from(noting.clone());
    let mut fut = std::pin::pin!(fut);
    let mut count = 0;
    let out = std::future::poll_fn(|cx| {
        *noting.outer.lock().unwrap() = Some(cx.waker().clone());
        noting.woken.store(false, Ordering::SeqCst);
        let poll = fut.as_mut().poll(&mut Context::from_waker(&waker));
        if noting.woken.load(Ordering::SeqCst) {
            count += 1;
        }
        poll
    })
    .await;
    (out, count)
}
