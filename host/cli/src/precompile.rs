//! `airlock precompile`: every tool the configuration loads, compiled into
//! a directory ahead of its first start (a container image's build), which
//! hosts then read as their `precompiled_dir`.

use airlock_host::{Airlock, Config};
use std::path::Path;
use std::process::ExitCode;

/// Compiles every tool `config` loads into `dir` (else its
/// `precompiled_dir`), and says how many, where, and which could not be.
pub(crate) async fn precompile(dir: Option<&Path>, mut config: Config) -> ExitCode {
    let Some(dir) = dir
        .map(Path::to_path_buf)
        .or_else(|| config.precompiled_dir.clone())
    else {
        eprintln!(
            "airlock: precompile into which directory? Name it (airlock precompile DIR), or set \
             precompiled_dir in airlock.toml"
        );
        return ExitCode::from(2);
    };
    // The directory is written as a cache of its own, with nothing behind
    // it: each tool is compiled (or found there already) and stored.
    config.artifact_cache = true;
    config.cache_dir = Some(dir.clone());
    config.precompiled_dir = None;
    let airlock = match Airlock::new(config).await {
        Ok(airlock) => airlock,
        Err(e) => {
            eprintln!("airlock: {e:#}");
            return ExitCode::from(crate::EXIT_CONFIG);
        }
    };
    if airlock.engine().cache_dir() != Some(dir.as_path()) {
        eprintln!(
            "airlock: {} cannot hold compiled tools (the warning above says why)",
            dir.display()
        );
        return ExitCode::from(crate::EXIT_CONFIG);
    }
    let registry = airlock.registry();
    // A tool refused for want of a grant was compiled all the same: a host
    // that grants it finds it here.
    let failed: Vec<_> = registry
        .failures()
        .iter()
        .filter(|f| {
            f.tool
                .as_deref()
                .is_none_or(|t| registry.refused(t).is_none())
        })
        .collect();
    for failure in &failed {
        eprintln!("airlock: not compiled: {failure}");
    }
    let (count, bytes) = artifacts(&dir);
    println!(
        "{count} compiled tools in {} ({} MiB). Hosts of this CPU and configuration read them \
         with precompiled_dir = \"{}\" in airlock.toml.",
        dir.display(),
        bytes >> 20,
        dir.display()
    );
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// How many compiled components `dir` holds, and their bytes.
pub(crate) fn artifacts(dir: &Path) -> (usize, u64) {
    std::fs::read_dir(dir).map_or((0, 0), |entries| {
        entries
            .filter_map(Result::ok)
            .filter(|e| e.path().extension().is_some_and(|x| x == "cwasm"))
            .fold((0, 0), |(n, b), e| {
                (n + 1, b + e.metadata().map_or(0, |m| m.len()))
            })
    })
}
