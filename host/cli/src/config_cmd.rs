//! `airlock config`: which files are read, and the configuration in effect,
//! a key per line with where its value comes from: the command line, the
//! configuration file (with the settings files it merges), or the default.
//!
//! The keys are read off the configuration's `Debug` form, so every field
//! is shown as the host holds it, without a second list of them to keep.

use airlock_host::Config;
use std::collections::BTreeMap;
use std::process::ExitCode;

/// Prints the files read, then every key of `effective` (the file's values
/// with the command line's on top) with its source: `command line` where
/// it differs from `file` (the file alone), the file where that differs
/// from the defaults, else `default`.
pub(crate) fn show(effective: &Config, file: &Config) -> ExitCode {
    let defaults = leaves(&Config::default());
    // A `[tools.NAME]` field left as it is by default is a default.
    let mut blank = Config::default();
    blank.tools.insert(String::new(), Default::default());
    let tool_defaults = leaves(&blank);
    let tool_default = |key: &str| -> Option<&String> {
        let field = key.strip_prefix("tools.\"")?.split_once("\".")?.1;
        tool_defaults.get(&format!("tools.\"\".{field}"))
    };
    let from_file = leaves(file);
    let source = effective
        .source
        .as_ref()
        .map_or_else(|| "the file".to_string(), |p| p.display().to_string());
    let written = crate::render::to_stdout(|out| {
        match &effective.source {
            Some(path) => writeln!(out, "read:    {}", path.display())?,
            None => writeln!(out, "read:    no file: the defaults, and the command line")?,
        }
        for merged in &effective.merged_settings {
            writeln!(out, "merged:  {} (permissions and hooks)", merged.display())?;
        }
        if let Some(lock) = effective.lock_path() {
            writeln!(out, "lock:    {}", lock.display())?;
        }
        writeln!(out)?;
        for (key, value) in leaves(effective) {
            if key == "source" || key == "merged_settings" {
                continue;
            }
            let default = defaults.get(&key).or_else(|| tool_default(&key));
            let from = if default == Some(&value) {
                "default"
            } else if from_file.get(&key) != Some(&value) {
                "command line"
            } else {
                source.as_str()
            };
            writeln!(out, "{key} = {value}    # {from}")?;
        }
        Ok(())
    });
    crate::printed(written)
}

/// Every leaf of `config`'s pretty `Debug` form, by its dotted path
/// (`limits.timeout_ms`, `tools."fetch".network`).
fn leaves(config: &Config) -> BTreeMap<String, String> {
    let text = format!("{config:#?}");
    let mut found = BTreeMap::new();
    let mut path: Vec<(usize, String)> = Vec::new();
    for line in text.lines().skip(1) {
        let indent = line.len() - line.trim_start().len();
        let line = line.trim().trim_end_matches(',');
        while path.last().is_some_and(|(depth, _)| *depth >= indent) {
            path.pop();
        }
        let Some((key, value)) = split_key(line) else {
            // An item of a list (or a struct's name opening it): the list's
            // items make its one value.
            let item =
                !line.is_empty() && !line.ends_with(['{', '[', '(']) && !"}])".contains(line);
            if item && !path.is_empty() {
                let dotted: Vec<&str> = path.iter().map(|(_, k)| k.as_str()).collect();
                let leaf: &mut String = found.entry(dotted.join(".")).or_default();
                if !leaf.is_empty() {
                    leaf.push_str(", ");
                }
                leaf.push_str(line);
            }
            continue;
        };
        let opens = value.ends_with('{') || value.ends_with('[') || value.ends_with('(');
        if opens {
            path.push((indent, key.to_string()));
            continue;
        }
        let mut dotted: Vec<&str> = path.iter().map(|(_, k)| k.as_str()).collect();
        dotted.push(key);
        found.insert(dotted.join("."), value.to_string());
    }
    found
}

/// `name: value` (or `"key": value` in a map) split at its colon.
fn split_key(line: &str) -> Option<(&str, &str)> {
    if let Some(rest) = line.strip_prefix('"') {
        let end = rest.find("\": ")?;
        return Some((&line[..end + 2], &rest[end + 3..]));
    }
    let (key, value) = line.split_once(": ")?;
    key.chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_')
        .then_some((key, value))
}
