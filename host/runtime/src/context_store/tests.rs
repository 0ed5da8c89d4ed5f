use super::*;
use crate::policy::PermissionRules;
use crate::registry::Registry;
use airlock_core::config::Config;
use airlock_core::descriptor::{Descriptor, SafetyFlags, WorkspaceAccess};
use airlock_core::grants::FileStamp;
use airlock_core::grants::Grants;
use airlock_core::permissions::PermissionMode;
use airlock_core::tool::ContextChange;

fn setup() -> (tempfile::TempDir, Grants) {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("sub")).unwrap();
    std::fs::write(tmp.path().join("sub/f.txt"), "abc").unwrap();
    let config = Config {
        workspace: Some(tmp.path().to_path_buf()),
        ..Config::default()
    };
    let grants = Grants::from_config(&config).unwrap();
    (tmp, grants)
}

fn fresh(grants: &Grants) -> ToolContext {
    ToolContext::new(
        grants,
        Arc::new(Registry::new()),
        PermissionRules::default(),
        PermissionMode::default(),
    )
}

fn change(grants: &Grants, cx: &mut ToolContext, changes: &[ContextChange]) {
    let mut d = Descriptor::new("t", "t");
    d.capabilities.workspace = WorkspaceAccess::Read;
    let call = grants
        .for_tool("t")
        .unwrap()
        .for_call(&d, SafetyFlags::empty(), &BTreeMap::new());
    assert!(cx.apply("t", changes, &call, true).is_empty());
}

fn memory() -> Contexts {
    Contexts::new(
        Arc::new(Memory::default()),
        Duration::from_secs(60),
        "memory",
    )
}

#[tokio::test]
async fn a_context_is_created_when_a_call_changes_it_and_restored_from_its_id() {
    let (_tmp, grants) = setup();
    let contexts = memory();
    let mut cx = fresh(&grants);
    let root = cx.cwd().to_string();
    let loaded = contexts.load(None, &mut cx).await.unwrap();
    change(
        &grants,
        &mut cx,
        &[
            ContextChange::SetCwd { path: "sub".into() },
            ContextChange::RecordFileRead {
                path: "f.txt".into(),
            },
            ContextChange::SetEnv {
                name: "A".into(),
                value: "1".into(),
            },
            ContextChange::SetState {
                key: "k/with:odd \"chars\"".into(),
                value: "v".into(),
            },
        ],
    );
    let id = contexts.save(loaded, &cx).await.unwrap().expect("created");
    assert!(is_context_id(&id), "{id}");

    let mut again = fresh(&grants);
    contexts.load(Some(&id), &mut again).await.unwrap();
    assert_eq!(again.cwd(), format!("{root}/sub"));
    assert_eq!(again.env()["A"], "1");
    assert_eq!(again.state_of("t").unwrap()["k/with:odd \"chars\""], "v");
    assert_eq!(
        again.file_stamp(&format!("{root}/sub/f.txt")),
        cx.file_stamp(&format!("{root}/sub/f.txt"))
    );
    assert!(again.file_stamp(&format!("{root}/sub/f.txt")).is_some());
}

#[tokio::test]
async fn the_default_context_is_shared_by_calls_that_name_none_and_kept_apart() {
    let (_tmp, grants) = setup();
    let contexts = memory();
    let mut first = fresh(&grants);
    let root = first.cwd().to_string();
    let loaded = contexts.load_default(&mut first, None).await.unwrap();
    change(
        &grants,
        &mut first,
        &[ContextChange::SetCwd { path: "sub".into() }],
    );
    assert_eq!(contexts.save(loaded, &first).await.unwrap(), None, "no id");

    // A later call in the default context sees the cwd, and waits for an
    // instance slot in the same turn; a new context sees neither.
    let mut second = fresh(&grants);
    contexts.load_default(&mut second, None).await.unwrap();
    assert_eq!(second.cwd(), format!("{root}/sub"));
    assert_eq!(second.tenant(), first.tenant());
    let mut other = fresh(&grants);
    let loaded = contexts.load(None, &mut other).await.unwrap();
    assert_eq!(other.cwd(), root);
    assert_ne!(other.tenant(), first.tenant());
    change(
        &grants,
        &mut other,
        &[ContextChange::SetCwd { path: "sub".into() }],
    );
    let id = contexts
        .save(loaded, &other)
        .await
        .unwrap()
        .expect("created");
    let mut again = fresh(&grants);
    contexts.load(Some(&id), &mut again).await.unwrap();
    let mut and_again = fresh(&grants);
    contexts.load(Some(&id), &mut and_again).await.unwrap();
    assert_eq!(again.tenant(), and_again.tenant());
    assert_ne!(again.tenant(), first.tenant());

    // An owner's default context is its own: it sees none of the shared
    // one's changes, and takes its own turn.
    let mut owned = fresh(&grants);
    contexts
        .load_default(&mut owned, Some("alice"))
        .await
        .unwrap();
    assert_eq!(owned.cwd(), root);
    assert_ne!(owned.tenant(), first.tenant());
}

#[tokio::test]
async fn a_merge_creates_sets_removes_and_starts_an_expired_context_anew() {
    let dir = tempfile::tempdir().unwrap();
    let stores: [Box<dyn ContextStore>; 2] = [
        Box::new(Memory::default()),
        Box::new(Files::new(dir.path().join("contexts"))),
    ];
    for store in stores {
        merges_and_removes(store.as_ref()).await;
    }
}

async fn merges_and_removes(store: &dyn ContextStore) {
    let ttl = Duration::from_secs(60);
    let cwd: Fields = [("cwd".to_string(), "/a".to_string())].into();
    let env: Fields = [("env:A".to_string(), "1".to_string())].into();
    store.merge("default", &cwd, &[], ttl).await.unwrap();
    assert_eq!(store.load("default", ttl).await.unwrap(), Some(cwd.clone()));
    store
        .merge("default", &env, &["cwd".to_string()], ttl)
        .await
        .unwrap();
    assert_eq!(store.load("default", ttl).await.unwrap(), Some(env.clone()));
    store
        .merge("default", &Fields::new(), &[], Duration::from_millis(1))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    store.merge("default", &cwd, &[], ttl).await.unwrap();
    assert_eq!(store.load("default", ttl).await.unwrap(), Some(cwd.clone()));
    assert!(!store.update("other", &cwd, &[], ttl).await.unwrap());
    store.remove("default").await.unwrap();
    assert_eq!(store.load("default", ttl).await.unwrap(), None);
    store.remove("default").await.unwrap();
}

#[tokio::test]
async fn writes_from_two_calls_at_once_are_both_kept() {
    let (_tmp, grants) = setup();
    let contexts = memory();
    let mut first = fresh(&grants);
    let loaded = contexts.load(None, &mut first).await.unwrap();
    change(
        &grants,
        &mut first,
        &[ContextChange::SetEnv {
            name: "A".into(),
            value: "1".into(),
        }],
    );
    let id = contexts.save(loaded, &first).await.unwrap().unwrap();
    // Two calls load the same context, one changes the cwd, the other
    // records a read; the later save keeps the earlier one's change.
    let (mut a, mut b) = (fresh(&grants), fresh(&grants));
    let la = contexts.load(Some(&id), &mut a).await.unwrap();
    let lb = contexts.load(Some(&id), &mut b).await.unwrap();
    change(
        &grants,
        &mut a,
        &[ContextChange::SetCwd { path: "sub".into() }],
    );
    change(
        &grants,
        &mut b,
        &[ContextChange::RecordFileRead {
            path: "sub/f.txt".into(),
        }],
    );
    contexts.save(la, &a).await.unwrap();
    contexts.save(lb, &b).await.unwrap();
    let mut c = fresh(&grants);
    let root = c.cwd().to_string();
    contexts.load(Some(&id), &mut c).await.unwrap();
    assert_eq!(c.cwd(), format!("{root}/sub"));
    assert!(c.file_stamp(&format!("{root}/sub/f.txt")).is_some());
    assert_eq!(c.env()["A"], "1");
}

#[tokio::test]
async fn an_unknown_or_expired_id_is_an_error_and_never_an_empty_context() {
    let (_tmp, grants) = setup();
    let contexts = Contexts::new(
        Arc::new(Memory::default()),
        Duration::from_millis(50),
        "memory",
    );
    let mut cx = fresh(&grants);
    for id in ["ctx_00000000000000000000000000000000", "../../etc", ""] {
        let err = contexts.load(Some(id), &mut cx).await.unwrap_err();
        assert!(matches!(err, ContextError::Unknown { .. }), "{err}");
        assert!(err.to_string().contains("start a new context"), "{err}");
    }
    let loaded = contexts.load(None, &mut cx).await.unwrap();
    change(
        &grants,
        &mut cx,
        &[ContextChange::SetEnv {
            name: "A".into(),
            value: "1".into(),
        }],
    );
    let id = contexts.save(loaded, &cx).await.unwrap().unwrap();
    let mut again = fresh(&grants);
    let loaded = contexts.load(Some(&id), &mut again).await.unwrap();
    tokio::time::sleep(Duration::from_millis(120)).await;
    change(
        &grants,
        &mut again,
        &[ContextChange::SetEnv {
            name: "B".into(),
            value: "2".into(),
        }],
    );
    // It expired during the call: the save says so.
    let err = contexts.save(loaded, &again).await.unwrap_err();
    assert!(matches!(err, ContextError::Lost { .. }), "{err}");
    assert!(err.to_string().contains("expired after"), "{err}");
    let err = contexts
        .load(Some(&id), &mut fresh(&grants))
        .await
        .unwrap_err();
    assert!(matches!(err, ContextError::Unknown { .. }), "{err}");
}

#[tokio::test]
async fn a_context_an_owner_created_is_that_owners_alone() {
    let (_tmp, grants) = setup();
    let contexts = memory();
    let env = |name: &str| ContextChange::SetEnv {
        name: name.into(),
        value: "1".into(),
    };
    let mut cx = fresh(&grants);
    let loaded = contexts
        .load_as(None, Some("alice"), &mut cx)
        .await
        .unwrap();
    change(&grants, &mut cx, &[env("A")]);
    let id = contexts.save(loaded, &cx).await.unwrap().expect("created");

    // To anyone else, a caller with no identity too, the id is unknown,
    // with the very error an id never handed out gets.
    let never = "ctx_00000000000000000000000000000000";
    let unknown = |e: ContextError| e.to_string().replace(&id, never);
    for owner in [Some("bob"), None, Some("")] {
        let err = contexts
            .load_as(Some(&id), owner, &mut fresh(&grants))
            .await
            .unwrap_err();
        let absent = contexts
            .load_as(Some(never), owner, &mut fresh(&grants))
            .await
            .unwrap_err();
        assert_eq!(unknown(err), absent.to_string(), "{owner:?}");
    }

    // Its owner uses it, and a change it saves keeps it the owner's.
    let mut again = fresh(&grants);
    let loaded = contexts
        .load_as(Some(&id), Some("alice"), &mut again)
        .await
        .unwrap();
    assert_eq!(again.env()["A"], "1");
    change(&grants, &mut again, &[env("B")]);
    assert_eq!(
        contexts.save(loaded, &again).await.unwrap(),
        Some(id.clone())
    );
    let mut third = fresh(&grants);
    contexts
        .load_as(Some(&id), Some("alice"), &mut third)
        .await
        .unwrap();
    assert_eq!(
        (third.env()["A"].as_str(), third.env()["B"].as_str()),
        ("1", "1")
    );
    assert!(
        contexts
            .load_as(Some(&id), Some("bob"), &mut fresh(&grants))
            .await
            .is_err()
    );

    // A context created with no identity is not anyone's to take.
    let mut anonymous = fresh(&grants);
    let loaded = contexts.load(None, &mut anonymous).await.unwrap();
    change(&grants, &mut anonymous, &[env("C")]);
    let open = contexts.save(loaded, &anonymous).await.unwrap().unwrap();
    contexts
        .load(Some(&open), &mut fresh(&grants))
        .await
        .unwrap();
    assert!(
        contexts
            .load_as(Some(&open), Some("alice"), &mut fresh(&grants))
            .await
            .is_err()
    );
}

#[tokio::test]
async fn an_unreachable_redis_is_a_clear_error() {
    let (_tmp, grants) = setup();
    // A port nothing listens on: bound, then closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let config = ContextsConfig {
        store: ContextStoreUrl::try_from(format!("redis://:pw@127.0.0.1:{port}")).unwrap(),
        ttl_secs: 60,
        password_file: None,
    };
    let contexts = Contexts::from_config(&config);
    let mut cx = fresh(&grants);
    let err = contexts
        .load(Some("ctx_00000000000000000000000000000000"), &mut cx)
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, ContextError::Store { .. }), "{text}");
    assert!(
        text.contains(&format!("redis://127.0.0.1:{port}/0")),
        "{text}"
    );
    assert!(!text.contains("pw"), "the password is never shown: {text}");
}

#[test]
fn stamps_round_trip_and_bad_ones_are_refused() {
    let stamp = FileStamp {
        modified_ns: 17,
        size: 3,
        blake3: [0xab; 32],
    };
    let (_tmp, grants) = setup();
    let cx = fresh(&grants);
    cx.read_files().lock().unwrap().put("/w/f".into(), stamp);
    let fields = cx.to_fields();
    let mut again = fresh(&grants);
    again.restore_fields(&fields);
    assert_eq!(again.file_stamp("/w/f"), Some(stamp));
    let mut bad = BTreeMap::new();
    bad.insert("read:/w/g".to_string(), "17 3 zz".to_string());
    bad.insert("env:1X".to_string(), "v".to_string());
    bad.insert("unknown".to_string(), "v".to_string());
    let mut third = fresh(&grants);
    third.restore_fields(&bad);
    assert!(third.file_stamp("/w/g").is_none());
    assert!(third.env().is_empty());
}

/// A context's saved results are kept under its name: a stored context's
/// id, a default context's store key (its owner's own), and for a fresh
/// context the id it takes when it is created, which a call that saved a
/// result keeps even if it changed nothing else.
#[tokio::test]
async fn a_context_names_its_saved_results_and_a_fresh_one_that_kept_one_is_created() {
    let (_tmp, grants) = setup();
    let contexts = memory();
    let mut cx = fresh(&grants);
    contexts.load_default(&mut cx, None).await.unwrap();
    assert_eq!(cx.results_key(), results_key(None, None));
    let mut owned = fresh(&grants);
    contexts
        .load_default(&mut owned, Some("alice"))
        .await
        .unwrap();
    assert_eq!(owned.results_key(), results_key(None, Some("alice")));
    assert_ne!(owned.results_key(), cx.results_key());

    // Nothing changed and nothing kept: no context.
    let mut unkept = fresh(&grants);
    let loaded = contexts.load(None, &mut unkept).await.unwrap();
    assert_eq!(contexts.save(loaded, &unkept).await.unwrap(), None);

    let mut kept = fresh(&grants);
    let mut loaded = contexts.load(None, &mut kept).await.unwrap();
    let key = kept.results_key().to_string();
    assert!(is_context_id(&key), "{key}");
    assert_ne!(key, unkept.results_key());
    loaded.keep();
    let id = contexts.save(loaded, &kept).await.unwrap();
    assert_eq!(id.as_deref(), Some(key.as_str()), "created under that id");
    let mut again = fresh(&grants);
    let loaded = contexts.load(Some(&key), &mut again).await.unwrap();
    assert_eq!(again.results_key(), results_key(Some(&key), None));
    assert_eq!(contexts.save(loaded, &again).await.unwrap(), Some(key));
}

/// Saves a context moved to `sub/`: the default one (`new: false`), or a
/// new one of `owner`, whose id is returned.
async fn moved_to_sub(
    contexts: &Contexts,
    grants: &Grants,
    new: bool,
    owner: Option<&str>,
) -> Option<String> {
    let mut cx = fresh(grants);
    let loaded = match new {
        true => contexts.load_as(None, owner, &mut cx).await,
        false => contexts.load_default(&mut cx, None).await,
    }
    .unwrap();
    change(
        grants,
        &mut cx,
        &[ContextChange::SetCwd { path: "sub".into() }],
    );
    contexts.save(loaded, &cx).await.unwrap()
}

/// A context the store lost (here: removed behind the host's back, as an
/// eviction or a restart would) is reported lost, never replaced by a
/// fresh one unannounced: the default context's call fails once and the
/// next one starts fresh; a named one says it was lost, not "never handed
/// out". Another process (a replica that never saw them) cannot tell.
#[tokio::test]
async fn a_context_the_store_lost_is_reported_and_the_default_one_not_silently_replaced() {
    let (_tmp, grants) = setup();
    let store = Arc::new(Memory::default());
    let contexts = Contexts::new(store.clone(), Duration::from_secs(60), "memory");
    let root = fresh(&grants).cwd().to_string();
    moved_to_sub(&contexts, &grants, false, None).await;
    let id = moved_to_sub(&contexts, &grants, true, None).await.unwrap();

    store.remove(DEFAULT_ID).await.unwrap();
    store.remove(&id).await.unwrap();

    let err = contexts
        .load_default(&mut fresh(&grants), None)
        .await
        .unwrap_err();
    assert!(matches!(err, ContextError::Lost { id: None, .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("the context store lost the default context")
            && text.contains("did not run")
            && text.contains("the next call starts from a fresh default context"),
        "{text}"
    );
    let mut next = fresh(&grants);
    contexts.load_default(&mut next, None).await.unwrap();
    assert_eq!(next.cwd(), root, "the next call starts fresh");
    // Another replica sharing the store finds the fresh one: no second
    // report.
    let replica = Contexts::new(store.clone(), Duration::from_secs(60), "memory");
    replica
        .load_default(&mut fresh(&grants), None)
        .await
        .unwrap();

    let err = contexts
        .load(Some(&id), &mut fresh(&grants))
        .await
        .unwrap_err();
    assert!(
        matches!(err, ContextError::Lost { id: Some(_), .. }),
        "{err}"
    );
    assert!(
        err.to_string().contains("the context store lost context"),
        "{err}"
    );
    // Reported once: then (and on a replica that never saw it) unknown.
    let err = contexts
        .load(Some(&id), &mut fresh(&grants))
        .await
        .unwrap_err();
    assert!(matches!(err, ContextError::Unknown { .. }), "{err}");
    assert!(
        err.to_string().contains("or the context store lost it"),
        "{err}"
    );

    // A default context forgotten on purpose is not lost.
    moved_to_sub(&contexts, &grants, false, None).await;
    contexts.forget_default(None).await.unwrap();
    let mut after = fresh(&grants);
    contexts.load_default(&mut after, None).await.unwrap();
    assert_eq!(after.cwd(), root);
}

/// A context unused for longer than its lifetime is said to have expired.
#[tokio::test]
async fn a_default_context_that_expired_says_so() {
    let (_tmp, grants) = setup();
    let contexts = Contexts::new(
        Arc::new(Memory::default()),
        Duration::from_millis(50),
        "memory",
    );
    moved_to_sub(&contexts, &grants, false, None).await;
    tokio::time::sleep(Duration::from_millis(80)).await;
    let err = contexts
        .load_default(&mut fresh(&grants), None)
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("the default context expired after"),
        "{err}"
    );
}

/// That the store lost a context is said only to its owner: to anyone
/// else its id stays one the store does not hold.
#[tokio::test]
async fn only_its_owner_is_told_a_context_was_lost() {
    let (_tmp, grants) = setup();
    let store = Arc::new(Memory::default());
    let contexts = Contexts::new(store.clone(), Duration::from_secs(60), "memory");
    let id = moved_to_sub(&contexts, &grants, true, Some("alice"))
        .await
        .unwrap();
    store.remove(&id).await.unwrap();
    let err = contexts
        .load_as(Some(&id), Some("bob"), &mut fresh(&grants))
        .await
        .unwrap_err();
    assert!(matches!(err, ContextError::Unknown { .. }), "{err}");
    let err = contexts
        .load_as(Some(&id), Some("alice"), &mut fresh(&grants))
        .await
        .unwrap_err();
    assert!(matches!(err, ContextError::Lost { .. }), "{err}");
}
