//! Components built in the test run by the languages' own toolchains:
//! the stock ones from `tests/stock/` (no SDK) and the first-party Python
//! and JavaScript tools from `guest-tools/` (over the SDKs, with the
//! commands `airlock build` runs). The toolchains: componentize-py
//! (`componentize_py.rs`) and jco with both of its JavaScript engines
//! (`tests/toolchains/package.json` and its lock file, `npm ci` by the Node
//! of `node.rs`, which also brings the JavaScript tools' dependencies).
//! Each component is rebuilt only when its sources, the WIT or the
//! toolchain pins changed (a record of them is kept beside it); a file lock
//! keeps two test binaries from building at once.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Where the toolchains and the components go.
const OUT: &str = concat!(env!("CARGO_TARGET_TMPDIR"), "/stock");

/// `relative` in the repository (found above the crate that includes this
/// file, which may be `tests` or a host crate).
fn repo(relative: &str) -> PathBuf {
    static ROOT: OnceLock<PathBuf> = OnceLock::new();
    ROOT.get_or_init(|| {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .ancestors()
            .find(|dir| dir.join("wit/tool.wit").is_file())
            .expect("the crate is inside the Airlock repository")
            .to_path_buf()
    })
    .join(relative)
}

/// jco's JavaScript engines.
#[derive(Clone, Copy, Debug)]
pub enum Engine {
    /// SpiderMonkey (jco's default).
    StarlingMonkey,
    /// QuickJS (`--backend qjs`), with the async ABI it uses by default.
    QuickJs,
}

/// `tests/stock/python/app.py` built by componentize-py (its defaults).
pub fn python_tool() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let sources = [repo("tests/stock/python/app.py")];
        built("python", &sources, |out| {
            let mut command = Command::new(super::componentize_py::componentize_py());
            command
                .arg("-d")
                .arg(repo("wit"))
                .args(["-w", "tool-component", "componentize", "-p"])
                .arg(repo("tests/stock/python"))
                .args(["app", "-o"])
                .arg(out);
            Ok(command)
        })
        .unwrap_or_else(|message| panic!("{message}"))
    })
}

/// `tests/stock/js/tool.js` built by jco with `engine`.
pub fn js_tool(engine: Engine) -> &'static Path {
    static STARLINGMONKEY: OnceLock<PathBuf> = OnceLock::new();
    static QUICKJS: OnceLock<PathBuf> = OnceLock::new();
    let (once, name, flags): (_, _, &[&str]) = match engine {
        Engine::StarlingMonkey => (&STARLINGMONKEY, "js-starlingmonkey", &[]),
        Engine::QuickJs => (&QUICKJS, "js-quickjs", &["--backend", "qjs"]),
    };
    once.get_or_init(|| {
        let sources = [repo("tests/stock/js/tool.js")];
        built(name, &sources, |out| {
            let (node, jco) = jco()?;
            let mut command = Command::new(node);
            command
                .arg(jco)
                .arg("componentize")
                .arg(repo("tests/stock/js/tool.js"))
                .arg("-w")
                .arg(repo("wit"))
                .args(["-n", "tool-component-with-files"])
                .args(flags)
                .arg("-o")
                .arg(out);
            Ok(command)
        })
        .unwrap_or_else(|message| panic!("{message}"))
    })
}

/// `guest-tools/python`, the `python` tool, built as `airlock build`
/// builds it.
pub fn python_repl() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let project = repo("guest-tools/python");
        let sources = [
            project.join("app.py"),
            repo("sdk/python/airlock_sdk/__init__.py"),
        ];
        built("python-repl", &sources, |out| {
            Ok(python_sdk_build(&project, out))
        })
        .unwrap_or_else(|message| panic!("{message}"))
    })
}

/// The command `airlock build` runs for the Python SDK project in
/// `project` (its `app.py`), writing `out`.
pub fn python_sdk_build(project: &Path, out: &Path) -> Command {
    let mut command = Command::new(super::componentize_py::componentize_py());
    command
        .arg("-d")
        .arg(repo("wit"))
        .args(["-w", "tool-component", "componentize", "-p"])
        .arg(project)
        .arg("-p")
        .arg(repo("sdk/python"))
        .args(["app", "-o"])
        .arg(out);
    command
}

/// `guest-tools/json_query`, the `json_query` tool, built as `airlock
/// build` builds it, in a copy of the project whose `node_modules` holds
/// the SDK and the toolchain's copy of its dependency (`jmespath`, pinned
/// alike in both `package.json` files).
pub fn json_query() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let project = repo("guest-tools/json_query");
        let sdk = repo("sdk/js");
        let sources = [
            project.join("tool.js"),
            project.join("package.json"),
            sdk.join("index.js"),
            sdk.join("files.js"),
        ];
        built("json_query", &sources, |out| {
            let (_, jco) = jco()?;
            let pin = |file: &Path| -> Result<String, String> {
                let text = std::fs::read_to_string(file)
                    .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
                let json: serde_json::Value =
                    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", file.display()))?;
                Ok(json["dependencies"]["jmespath"].to_string())
            };
            let toolchains = repo("tests/toolchains/package.json");
            if pin(&project.join("package.json"))? != pin(&toolchains)? {
                return Err(format!(
                    "guest-tools/json_query/package.json and {} pin different jmespath versions",
                    toolchains.display()
                ));
            }
            let copy = Path::new(OUT).join("json_query-project");
            let _ = std::fs::remove_dir_all(&copy);
            let modules = copy.join("node_modules");
            std::fs::create_dir_all(&modules)
                .map_err(|e| format!("cannot create {}: {e}", modules.display()))?;
            std::fs::copy(project.join("tool.js"), copy.join("tool.js"))
                .map_err(|e| format!("cannot copy tool.js: {e}"))?;
            let installed = jco
                .ancestors()
                .nth(4)
                .expect("node_modules/@bytecodealliance/jco/dist/jco.js");
            let link = |from: &Path, name: &str| {
                std::os::unix::fs::symlink(from, modules.join(name))
                    .map_err(|e| format!("cannot link {name}: {e}"))
            };
            link(&sdk, "airlock-sdk")?;
            link(&installed.join("jmespath"), "jmespath")?;
            js_sdk_build(&copy, out)
        })
        .unwrap_or_else(|message| panic!("{message}"))
    })
}

/// The command `airlock build` runs for the JavaScript SDK project in
/// `project` (its `tool.js`, with `airlock-sdk` in its `node_modules`),
/// writing `out`.
pub fn js_sdk_build(project: &Path, out: &Path) -> Result<Command, String> {
    let (node, jco) = jco()?;
    let mut command = Command::new(node);
    command
        .arg(jco)
        .arg("componentize")
        .arg(project.join("tool.js"))
        .arg("-w")
        .arg(repo("wit"))
        .args([
            "-n",
            "tool-component-with-files",
            "--bundle",
            "--bundle-config",
        ])
        .arg(repo("sdk/js/bundle.config.js"))
        .arg("-o")
        .arg(out)
        .current_dir(project);
    Ok(command)
}

/// Builds `OUT/NAME.wasm` from `sources` with the command `make` returns,
/// unless the record beside it says it was built from what is there now.
fn built(
    name: &str,
    sources: &[PathBuf],
    make: impl FnOnce(&Path) -> Result<Command, String>,
) -> Result<PathBuf, String> {
    let dir = Path::new(OUT);
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let lock_path = dir.join(format!("{name}.lock"));
    let lock = File::create(&lock_path)
        .map_err(|e| format!("cannot create {}: {e}", lock_path.display()))?;
    lock.lock()
        .map_err(|e| format!("cannot lock {}: {e}", lock_path.display()))?;
    let out = dir.join(format!("{name}.wasm"));
    let record_path = dir.join(format!("{name}.built-from"));
    let record = inputs(name, sources)?;
    if out.is_file() && std::fs::read(&record_path).is_ok_and(|r| r == record) {
        return Ok(out);
    }
    let _ = std::fs::remove_file(&record_path);
    let mut command = make(&out)?;
    let output = command
        .env("PYTHONNOUSERSITE", "1")
        .output()
        .map_err(|e| format!("cannot run {:?}: {e}", command.get_program()))?;
    if !output.status.success() || !out.is_file() {
        return Err(format!(
            "building the {name} stock component failed: {}{}",
            String::from_utf8_lossy(&output.stderr).trim(),
            String::from_utf8_lossy(&output.stdout).trim()
        ));
    }
    std::fs::write(&record_path, record)
        .map_err(|e| format!("cannot write {}: {e}", record_path.display()))?;
    Ok(out)
}

/// What a component is built from: its sources, the WIT and the pins.
fn inputs(name: &str, sources: &[PathBuf]) -> Result<Vec<u8>, String> {
    let mut files: Vec<PathBuf> = ["tool.wit", "hook.wit"]
        .iter()
        .map(|f| repo("wit").join(f))
        .collect();
    files.extend_from_slice(sources);
    files.push(repo("tests/toolchains/package-lock.json"));
    let mut record = format!("{name} {}\n", super::componentize_py::PIN).into_bytes();
    for file in files {
        record.extend(
            std::fs::read(&file).map_err(|e| format!("cannot read {}: {e}", file.display()))?,
        );
    }
    Ok(record)
}

/// Node and jco's command-line entry point, `npm ci`'d from
/// `tests/toolchains/` when its lock file changed; once per test binary.
pub fn jco() -> Result<(PathBuf, PathBuf), String> {
    static JCO: OnceLock<Result<(PathBuf, PathBuf), String>> = OnceLock::new();
    JCO.get_or_init(install_jco).clone()
}

fn install_jco() -> Result<(PathBuf, PathBuf), String> {
    let node = super::node::node()?;
    let dir = Path::new(OUT).join("toolchains");
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let lock_file = repo("tests/toolchains/package-lock.json");
    let wanted = std::fs::read(&lock_file)
        .map_err(|e| format!("cannot read {}: {e}", lock_file.display()))?;
    let jco = dir.join("node_modules/@bytecodealliance/jco/dist/jco.js");
    let marker = dir.join("installed-lock.json");
    if std::fs::read(&marker).is_ok_and(|installed| installed == wanted) && jco.is_file() {
        return Ok((node.node, jco));
    }
    for file in ["package.json", "package-lock.json"] {
        let from = repo("tests/toolchains").join(file);
        std::fs::copy(&from, dir.join(file))
            .map_err(|e| format!("cannot copy {}: {e}", from.display()))?;
    }
    let installed = Command::new(&node.node)
        .arg(&node.npm)
        .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
        .current_dir(&dir)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", node.node.display()))?;
    if !installed.status.success() || !jco.is_file() {
        return Err(format!(
            "`npm ci` of jco in {} failed: {}",
            dir.display(),
            String::from_utf8_lossy(&installed.stderr).trim()
        ));
    }
    std::fs::write(&marker, &wanted)
        .map_err(|e| format!("cannot write {}: {e}", marker.display()))?;
    Ok((node.node, jco))
}
