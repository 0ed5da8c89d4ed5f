//! The deployment recipe (`Dockerfile`, `deploy/`): no container runtime or
//! cluster runs here, so every manifest is parsed and held to the fields
//! the Kubernetes API requires, to each other (selectors, ports, volumes,
//! the Deployment the autoscaler scales), and to Airlock itself (its
//! configuration parses; the probes ask the paths `airlock mcp --http`
//! serves, tested in `host/cli/tests/first_start.rs`).

use airlock_host::Config;
use airlock_host::config::ContextStoreUrl;
use serde_json::Value;
use std::collections::HashSet;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Every object in `deploy/k8s/*.yaml`, with the file it came from.
fn manifests() -> Vec<(String, Value)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(repo().join("deploy/k8s"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    let mut objects = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        for document in serde_norway::Deserializer::from_str(&text) {
            let value = <Value as serde::Deserialize>::deserialize(document)
                .unwrap_or_else(|e| panic!("{name} is not valid YAML: {e}"));
            objects.push((name.clone(), value));
        }
    }
    objects
}

/// The object of `kind` named `name`.
fn the<'a>(objects: &'a [(String, Value)], kind: &str, name: &str) -> &'a Value {
    let found: Vec<_> = objects
        .iter()
        .filter(|(_, o)| o["kind"] == kind && o["metadata"]["name"] == name)
        .collect();
    assert_eq!(found.len(), 1, "one {kind} {name}");
    &found[0].1
}

fn strings(value: &Value) -> Vec<&str> {
    value
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

#[test]
fn every_manifest_has_what_the_api_requires() {
    let objects = manifests();
    let kinds: HashSet<&str> = objects
        .iter()
        .filter_map(|(_, o)| o["kind"].as_str())
        .collect();
    for kind in [
        "ConfigMap",
        "Deployment",
        "Service",
        "HorizontalPodAutoscaler",
        "PersistentVolumeClaim",
        "NetworkPolicy",
    ] {
        assert!(kinds.contains(kind), "no {kind} in deploy/k8s");
    }
    for (file, object) in &objects {
        let api = object["apiVersion"].as_str().unwrap_or_default();
        let expected = match object["kind"].as_str().unwrap_or_default() {
            "Deployment" => "apps/v1",
            "HorizontalPodAutoscaler" => "autoscaling/v2",
            "ConfigMap" | "Service" | "PersistentVolumeClaim" | "Secret" => "v1",
            "NetworkPolicy" => "networking.k8s.io/v1",
            other => panic!("{file}: unexpected kind {other:?}"),
        };
        assert_eq!(api, expected, "{file}: apiVersion");
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        // A DNS-1123 label, as every one of these kinds requires.
        assert!(
            !name.is_empty()
                && name.len() <= 63
                && name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !name.starts_with('-')
                && !name.ends_with('-'),
            "{file}: metadata.name {name:?}"
        );
    }
}

#[test]
fn the_deployment_is_consistent_and_hardened() {
    let objects = manifests();
    let deployment = the(&objects, "Deployment", "airlock");
    let spec = &deployment["spec"];
    let template = &spec["template"];
    let selector = spec["selector"]["matchLabels"].as_object().unwrap();
    let labels = &template["metadata"]["labels"];
    for (key, value) in selector {
        assert_eq!(&labels[key], value, "the selector matches the pod template");
    }

    let pod = &template["spec"];
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_ne!(pod["securityContext"]["runAsUser"], 0);
    assert_eq!(pod["automountServiceAccountToken"], false);
    let volumes: HashSet<&str> = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    let containers: Vec<&Value> = pod["containers"]
        .as_array()
        .unwrap()
        .iter()
        .chain(pod["initContainers"].as_array().unwrap())
        .collect();
    for container in &containers {
        let name = container["name"].as_str().unwrap();
        assert!(container["image"].is_string(), "{name}: image");
        let security = &container["securityContext"];
        assert_eq!(security["readOnlyRootFilesystem"], true, "{name}");
        assert_eq!(security["allowPrivilegeEscalation"], false, "{name}");
        assert_eq!(
            strings(&security["capabilities"]["drop"]),
            ["ALL"],
            "{name}"
        );
        for mount in container["volumeMounts"].as_array().unwrap() {
            let volume = mount["name"].as_str().unwrap();
            assert!(
                volumes.contains(volume),
                "{name} mounts {volume}, which is no volume"
            );
        }
        // Everything airlock writes is under the writable /airlock.
        for var in container["env"].as_array().unwrap() {
            if ["XDG_CACHE_HOME", "XDG_DATA_HOME", "HOME"].contains(&var["name"].as_str().unwrap())
            {
                assert!(
                    var["value"].as_str().unwrap().starts_with("/airlock"),
                    "{name}: {var}"
                );
            }
        }
    }

    // The init container installs what the lock pins, with the main
    // container's configuration.
    let init = &pod["initContainers"][0];
    let script = strings(&init["args"]).join(" ");
    assert!(script.contains("airlock install --locked"), "{script}");

    let main = &pod["containers"][0];
    let args = strings(&main["args"]);
    assert_eq!(args[..2], ["mcp", "--http"]);
    // Safe as written: tokens are required (the ConfigMap's [auth]), and
    // only clients reach the port.
    assert!(!args.contains(&"--insecure-no-auth"), "{args:?}");
    let policy = the(&objects, "NetworkPolicy", "airlock");
    assert_eq!(
        policy["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/name"],
        "airlock"
    );
    assert_eq!(policy["spec"]["ingress"][0]["ports"][0]["port"], 8080);
    // The Host rule holds in any namespace.
    assert!(
        args.contains(&"airlock.$(POD_NAMESPACE).svc.cluster.local"),
        "{args:?}"
    );
    // Stopping drains: the preStop sleep and --drain-secs end before the
    // kubelet's kill.
    let drain: u64 = args
        .iter()
        .position(|a| *a == "--drain-secs")
        .and_then(|i| args.get(i + 1)?.parse().ok())
        .expect("--drain-secs N");
    let pre_stop = strings(&main["lifecycle"]["preStop"]["exec"]["command"]);
    assert_eq!(pre_stop[0], "sleep", "{pre_stop:?}");
    let pre_stop: u64 = pre_stop[1].parse().unwrap();
    let grace = pod["terminationGracePeriodSeconds"].as_u64().unwrap();
    assert!(pre_stop + drain < grace, "{pre_stop} + {drain} < {grace}");
    let port = &main["ports"][0];
    let port_name = port["name"].as_str().unwrap();
    for (probe, path) in [
        ("livenessProbe", "/health"),
        ("startupProbe", "/health"),
        ("readinessProbe", "/ready"),
    ] {
        let get = &main[probe]["httpGet"];
        assert_eq!(get["path"], path, "{probe}");
        assert_eq!(get["port"], port_name, "{probe}");
    }

    let service = the(&objects, "Service", "airlock");
    for (key, value) in service["spec"]["selector"].as_object().unwrap() {
        assert_eq!(&labels[key], value, "the Service selects the pods");
    }
    assert_eq!(service["spec"]["ports"][0]["targetPort"], port_name);

    let hpa = the(&objects, "HorizontalPodAutoscaler", "airlock");
    let target = &hpa["spec"]["scaleTargetRef"];
    assert_eq!(target["kind"], "Deployment");
    assert_eq!(target["name"], deployment["metadata"]["name"]);
    assert!(hpa["spec"]["maxReplicas"].as_u64() >= hpa["spec"]["minReplicas"].as_u64());

    // The claim and the ConfigMap the volumes name are the ones here.
    for (kind, source, field, name) in [
        (
            "PersistentVolumeClaim",
            "persistentVolumeClaim",
            "claimName",
            "airlock-workspace",
        ),
        ("ConfigMap", "configMap", "name", "airlock"),
    ] {
        let named = pod["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find_map(|v| v[source][field].as_str());
        assert_eq!(named, Some(name), "{kind}");
        the(&objects, kind, name);
    }
}

#[test]
fn the_configurations_are_what_airlock_reads() {
    let objects = manifests();
    let data = &the(&objects, "ConfigMap", "airlock")["data"];
    let base = Path::new("/airlock/etc");
    let config = Config::from_toml(data["airlock.toml"].as_str().unwrap(), Some(base))
        .unwrap_or_else(|e| panic!("the ConfigMap's airlock.toml: {e}"));
    assert_eq!(config.workspace.as_deref(), Some(Path::new("/workspace")));
    let auth = config.auth.as_ref().expect("[auth]: tokens are required");
    let jwks = auth.jwks_file.as_ref().expect("the keys from a Secret");
    let deployment = the(&objects, "Deployment", "airlock");
    let mounts = deployment["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]
        .as_array()
        .unwrap();
    let password = config.contexts.password_file.as_ref();
    for file in [Some(jwks), password] {
        let file = file.expect("the keys and the Redis password from Secrets");
        assert!(
            mounts
                .iter()
                .any(|m| file.starts_with(m["mountPath"].as_str().unwrap())),
            "{file:?} is mounted"
        );
    }
    // The replicas share contexts through the Redis Service here.
    let ContextStoreUrl::Redis { host, port, .. } = &config.contexts.store else {
        panic!("the replicas' contexts are in Redis")
    };
    let redis = the(&objects, "Service", host);
    assert_eq!(redis["spec"]["ports"][0]["port"], u64::from(*port));
    let deployment = the(&objects, "Deployment", host);
    for (key, value) in redis["spec"]["selector"].as_object().unwrap() {
        assert_eq!(
            &deployment["spec"]["template"]["metadata"]["labels"][key], value,
            "the Redis Service selects the Redis pods"
        );
    }
    let policy = the(&objects, "NetworkPolicy", host);
    assert_eq!(
        policy["spec"]["ingress"][0]["from"][0]["podSelector"]["matchLabels"]["app.kubernetes.io/name"],
        "airlock",
        "only Airlock's pods reach the store"
    );
    assert!(
        data["airlock.lock"].is_string(),
        "the ConfigMap holds airlock.lock"
    );

    let image_config = repo().join("deploy/airlock.toml");
    let image = Config::from_file(&image_config).unwrap();
    assert_eq!(image.workspace.as_deref(), Some(Path::new("/workspace")));
    // The pods read the tools the image compiled: the same directory, and
    // the limits they were compiled under.
    assert!(image.precompiled_dir.is_some());
    assert_eq!(config.precompiled_dir, image.precompiled_dir);
    assert_eq!(config.limits, image.limits);
}

#[test]
fn the_dockerfile_builds_with_the_pinned_toolchain_and_runs_unprivileged() {
    let root = repo();
    let text = std::fs::read_to_string(root.join("Dockerfile")).unwrap();
    let toolchain = std::fs::read_to_string(root.join("rust-toolchain.toml")).unwrap();
    let channel = toolchain
        .lines()
        .find_map(|l| l.strip_prefix("channel = "))
        .unwrap()
        .trim_matches('"');
    let stages: Vec<&str> = text.lines().filter(|l| l.starts_with("FROM ")).collect();
    assert_eq!(stages.len(), 2, "a build stage and a run stage: {stages:?}");
    assert!(
        stages[0].starts_with(&format!("FROM rust:{channel}-")),
        "{}",
        stages[0]
    );
    assert!(text.contains("rustup target add wasm32-wasip2"));
    assert!(text.contains("--locked"));

    let run_stage = text.split(stages[1]).nth(1).unwrap();
    let user = run_stage
        .lines()
        .find_map(|l| l.strip_prefix("USER "))
        .expect("the run stage names a user");
    assert!(!user.starts_with('0') && user != "root", "USER {user}");
    for line in run_stage
        .lines()
        .filter(|l| l.starts_with("COPY ") && !l.contains("--from"))
    {
        let source = line.split_whitespace().nth(1).unwrap();
        assert!(root.join(source).is_file(), "{line}: no {source}");
    }
    // The tools are compiled as the image is built, by the user that runs
    // it, into the directory the image's configuration names.
    let precompile = run_stage
        .find("RUN airlock precompile")
        .expect("the run stage precompiles the tools");
    assert!(run_stage.find("USER ").unwrap() < precompile);
    let image = Config::from_file(&root.join("deploy/airlock.toml")).unwrap();
    let parent = image.precompiled_dir.unwrap().parent().unwrap().to_owned();
    assert!(
        run_stage.contains(&format!(
            "chown 10001:10001 /workspace {}",
            parent.display()
        )),
        "{} is made the run user's",
        parent.display()
    );
    assert!(run_stage.contains(r#"ENTRYPOINT ["airlock"]"#));
    assert!(run_stage.contains(r#"CMD ["mcp", "--http", "0.0.0.0:8080", "--insecure-no-auth"]"#));
}
