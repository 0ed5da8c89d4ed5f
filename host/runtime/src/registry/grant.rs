//! Granting: each loaded tool under the operator's grants, and who owns a
//! name when several tools claim it.

use super::{Loaded, Registry};
use crate::{skill_tool, tool_search};
use airlock_core::config::Config;
use airlock_core::error::LoadError;
use airlock_core::grants::Grants;
use airlock_core::tool::ToolOrigin;
use airlock_engine::ungranted_network;
use std::collections::HashMap;
use std::sync::Arc;

impl Registry {
    /// The same tools under other grants (nothing is recompiled): each tool
    /// gets its grants, is dropped when switched off, and is refused when it
    /// imports `wasi:http` and asks for hosts none of which is granted. A name
    /// belongs to one tool: of several with the same code, the first is
    /// kept; of others, the one whose file `[tools.NAME] source` names,
    /// else the first loaded (bundled tools, then the directories in
    /// order), and the rest are refused, saying how to choose. A clash of
    /// aliases, or with a built-in's name, is refused.
    pub fn regrant(&self, config: &Config, grants: &Grants) -> Registry {
        let mut registry = Registry {
            loaded: self.loaded.clone(),
            load_failures: self.load_failures.clone(),
            servers: self.servers.clone(),
            compiling: self.compiling.clone(),
            unlisted: self.unlisted.clone(),
            ..Registry::default()
        };
        registry.grant(config, grants);
        registry
    }

    pub(super) fn grant(&mut self, config: &Config, grants: &Grants) {
        self.entries.clear();
        self.index.clear();
        self.failures = self.load_failures.clone();
        let (kept, refused) = owners(&self.loaded, config);
        for (loaded, error) in refused {
            let d = loaded.tool.descriptor();
            self.fail(loaded.tool.origin().clone(), &d.name, error);
        }
        for loaded in kept {
            let d = loaded.tool.descriptor();
            let origin = loaded.tool.origin().clone();
            let tool_grants = match grants.for_tool(&d.name) {
                Ok(g) => g,
                Err(error) => {
                    self.fail(origin, &d.name, error);
                    continue;
                }
            };
            if !tool_grants.enabled {
                tracing::info!(tool = %d.name, "switched off in the configuration");
                continue;
            }
            if let Some(error) = ungranted_network(d, &loaded.network_imports, &tool_grants) {
                self.fail(origin, &d.name, error);
                continue;
            }
            if let Err(error) = self.register(&loaded, tool_grants) {
                self.fail(origin, &d.name, error);
            }
        }
    }
}

/// A tool refused its name, and why.
type Refused = (Arc<Loaded>, LoadError);

/// Names no loaded tool may take: the built-in tools'.
pub(super) const BUILTIN_NAMES: &[&str] = &[tool_search::NAME, skill_tool::NAME];

/// Which of `loaded` may take their names: of tools with the same name,
/// one with the same code as an earlier one is dropped (the same tool
/// twice, such as a bundled tool also installed in a tool directory); of
/// the rest, the one from the file `[tools.NAME] source` names, else the
/// first. Returns the tools kept, in order, and the ones refused with why.
fn owners(loaded: &[Arc<Loaded>], config: &Config) -> (Vec<Arc<Loaded>>, Vec<Refused>) {
    let mut by_name: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, l) in loaded.iter().enumerate() {
        by_name
            .entry(l.tool.descriptor().name.as_str())
            .or_default()
            .push(i);
    }
    let mut dropped = vec![false; loaded.len()];
    let mut refused = Vec::new();
    for (name, claimants) in by_name.into_iter().filter(|(_, c)| c.len() > 1) {
        let mut distinct: Vec<usize> = Vec::new();
        for &i in &claimants {
            let digest = loaded[i].tool.digest();
            if digest.is_some() && distinct.iter().any(|&k| loaded[k].tool.digest() == digest) {
                dropped[i] = true;
            } else {
                distinct.push(i);
            }
        }
        if distinct.len() < 2 {
            continue;
        }
        let source = config
            .tool_config(name)
            .source
            .map(|s| std::fs::canonicalize(&s).unwrap_or(s));
        let is_source = |i: usize| match (loaded[i].tool.origin(), &source) {
            (ToolOrigin::File(file), Some(source)) => {
                std::fs::canonicalize(file).unwrap_or_else(|_| file.clone()) == *source
            }
            _ => false,
        };
        let owner = distinct
            .iter()
            .copied()
            .find(|&i| is_source(i))
            .unwrap_or(distinct[0]);
        if source.is_some() && !is_source(owner) {
            tracing::warn!(
                tool = name,
                "tools.{name}.source names no component that was loaded; keeping the first"
            );
        }
        for &i in distinct.iter().filter(|&&i| i != owner) {
            dropped[i] = true;
            if is_source(owner) {
                tracing::info!(
                    tool = name,
                    "tools.{name}.source chooses {}",
                    loaded[owner].tool.origin()
                );
                continue;
            }
            let hint = match loaded[i].tool.origin() {
                ToolOrigin::File(file) => format!(
                    "; to use this one instead, set `source = \"{}\"` under [tools.{name}]",
                    file.display()
                ),
                _ => String::new(),
            };
            refused.push((
                loaded[i].clone(),
                LoadError::Duplicate {
                    name: name.to_string(),
                    other: format!("{}{hint}", describe_owner(&loaded[owner])),
                },
            ));
        }
    }
    let kept = loaded
        .iter()
        .zip(&dropped)
        .filter(|(_, d)| !**d)
        .map(|(l, _)| l.clone())
        .collect();
    (kept, refused)
}

fn describe_owner(loaded: &Loaded) -> String {
    format!(
        "`{}` ({})",
        loaded.tool.descriptor().name,
        loaded.tool.origin()
    )
}
