//! Reading a configuration: TOML parsed, relative paths resolved against
//! the file, the settings files it lists merged in.

use super::hooks::HookSpec;
use super::{AuditSink, Config, ConfigError, settings, user_dir};
use crate::host_files::{self, Links};
use std::path::{Path, PathBuf};

impl Config {
    /// Parses TOML; relative paths resolve against `base` (the file's
    /// directory), or the current directory when `None`.
    pub fn from_toml(text: &str, base: Option<&Path>) -> Result<Config, ConfigError> {
        let error = |e: toml::de::Error| ConfigError {
            path: base.map_or("<config>".into(), |b| b.display().to_string()),
            message: located(text, &e),
        };
        let table: toml::Table = toml::from_str(text).map_err(error)?;
        let own_mode = table
            .get("permissions")
            .and_then(|p| p.as_table())
            .is_some_and(|p| p.contains_key("default_mode") || p.contains_key("defaultMode"));
        // From the text, not the table: its errors keep their place.
        let mut config: Config = toml::from_str(text).map_err(error)?;
        let zero = [
            ("contexts.ttl_secs", config.contexts.ttl_secs),
            ("limits.timeout_ms", config.limits.timeout_ms),
            ("audit.checkpoint_every", config.audit.checkpoint_every),
            ("audit.checkpoint_seconds", config.audit.checkpoint_seconds),
            ("audit.max_file_mib", config.audit.max_file_mib),
        ];
        if let Some((key, _)) = zero.iter().find(|(_, value)| *value == 0) {
            return Err(ConfigError {
                path: base.map_or("<config>".into(), |b| b.display().to_string()),
                message: format!("{key} must be at least 1"),
            });
        }
        let base = match base {
            Some(b) => b.to_path_buf(),
            None => std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")),
        };
        let fix = |p: &mut PathBuf| *p = resolve_path(p, &base);
        if let Some(dirs) = &mut config.tool_dirs {
            dirs.iter_mut().for_each(fix);
        }
        if let Some(ws) = &mut config.workspace {
            fix(ws);
        }
        for tool in config.tools.values_mut() {
            for mount in &mut tool.mounts {
                fix(&mut mount.host);
            }
            if let Some(source) = &mut tool.source {
                fix(source);
            }
        }
        for server in config.mcp_servers.values_mut() {
            if let Some(cwd) = &mut server.cwd {
                fix(cwd);
            }
        }
        for secret in config.secrets.values_mut() {
            if let Some(file) = &mut secret.file {
                fix(file);
            }
        }
        if let Some(file) = config.auth.as_mut().and_then(|a| a.jwks_file.as_mut()) {
            fix(file);
        }
        if let Some(dir) = &mut config.results_dir {
            fix(dir);
        }
        if let Some(file) = &mut config.contexts.password_file {
            fix(file);
        }
        config.contexts.check().map_err(|message| ConfigError {
            path: base.display().to_string(),
            message,
        })?;
        if let Some(dir) = &mut config.cache_dir {
            fix(dir);
        }
        if let Some(dir) = &mut config.precompiled_dir {
            fix(dir);
        }
        for dir in config.skills.dirs.iter_mut().flatten() {
            fix(dir);
        }
        if let Some(file) = &mut config.approvals {
            fix(file);
        }
        if let Some(key) = &mut config.audit.key {
            fix(key);
        }
        config.audit.trusted.iter_mut().for_each(fix);
        if let Some(AuditSink::File(path) | AuditSink::Unix(path)) = &mut config.audit.path {
            fix(path);
        }
        for rule in &mut config.trust {
            rule.keys.iter_mut().for_each(fix);
        }
        for group in config
            .hooks
            .pre_tool_use
            .iter_mut()
            .chain(&mut config.hooks.post_tool_use)
        {
            for hook in &mut group.hooks {
                if let HookSpec::Wasm { component, .. } = hook {
                    fix(component);
                }
            }
        }
        let mode = config.permissions.default_mode;
        for path in std::mem::take(&mut config.settings) {
            for note in settings::merge(&mut config, &resolve_path(&path, &base))? {
                tracing::info!("{note}");
            }
        }
        if own_mode {
            config.permissions.default_mode = mode;
        }
        Ok(config)
    }

    /// Reads a configuration file.
    pub fn from_file(path: &Path) -> Result<Config, ConfigError> {
        let text = host_files::read_text_capped(path, host_files::CONFIG_BYTES, Links::Follow)
            .map_err(|e| ConfigError {
                path: path.display().to_string(),
                message: e.to_string(),
            })?;
        let mut config = Config::from_toml(&text, path.parent()).map_err(|mut e| {
            e.path = path.display().to_string();
            e
        })?;
        config.source = Some(path.to_path_buf());
        Ok(config)
    }

    /// The configuration Airlock uses when none is named: `$AIRLOCK_CONFIG`,
    /// else `airlock.toml` in the user's config directory
    /// (`$XDG_CONFIG_HOME/airlock`, or `~/.config/airlock`), else defaults.
    /// A project directory's own `airlock.toml` is never read implicitly: a
    /// cloned repository must not grant itself capabilities.
    pub fn discover() -> Result<Config, ConfigError> {
        if let Some(path) = std::env::var_os("AIRLOCK_CONFIG") {
            return Config::from_file(Path::new(&path));
        }
        match user_dir("XDG_CONFIG_HOME", ".config").map(|d| d.join("airlock/airlock.toml")) {
            Some(path) if path.is_file() => Config::from_file(&path),
            _ => Ok(Config::default()),
        }
    }

    /// Where `airlock.lock` is: beside the configuration file this was read
    /// from, else in the user's config directory (`$XDG_CONFIG_HOME/airlock`,
    /// or `~/.config/airlock`).
    pub fn lock_path(&self) -> Option<PathBuf> {
        match &self.source {
            Some(file) => file.parent().map(|dir| dir.join("airlock.lock")),
            None => user_dir("XDG_CONFIG_HOME", ".config").map(|d| d.join("airlock/airlock.lock")),
        }
    }
}

/// Expands a leading `~/` and makes `path` absolute against `base`.
fn resolve_path(path: &Path, base: &Path) -> PathBuf {
    if let Ok(rest) = path.strip_prefix("~")
        && let Some(home) = std::env::var_os("HOME")
    {
        return PathBuf::from(home).join(rest);
    }
    base.join(path)
}

/// `error` as a line of its own: where it is in `text` (line and column),
/// what is wrong, and for a key that is not one, the nearest that is.
fn located(text: &str, error: &toml::de::Error) -> String {
    let message = error.message().trim_end();
    let place = error.span().and_then(|span| {
        let before = text.get(..span.start)?;
        let line = before.matches('\n').count() + 1;
        let column = before[before.rfind('\n').map_or(0, |i| i + 1)..]
            .chars()
            .count()
            + 1;
        Some(format!("line {line}, column {column}: "))
    });
    // With a near name, the list of every name is noise.
    let said = match suggestion(message) {
        Some(key) => format!(
            "{}; did you mean `{key}`?",
            message.split(", expected").next().unwrap_or(message)
        ),
        None => message.to_string(),
    };
    format!("{}{said}", place.unwrap_or_default())
}

/// For serde's "unknown field `x`, expected one of `a`, `b`" (or "unknown
/// variant"), the expected name nearest to `x`, when one is near enough to
/// be a typo.
fn suggestion(message: &str) -> Option<&str> {
    let rest = message
        .strip_prefix("unknown field `")
        .or_else(|| message.strip_prefix("unknown variant `"))?;
    let (given, expected) = rest.split_once('`')?;
    nearest_name(given, expected.split('`').skip(1).step_by(2))
}

/// The name in `known` nearest to `given`, when one is near enough for
/// `given` to be a typo of it (an edit or a swap per three letters).
///
/// ```
/// use airlock_core::config::nearest_name;
/// assert_eq!(nearest_name("fecth", ["fetch", "read"]), Some("fetch"));
/// assert_eq!(nearest_name("zzz", ["fetch", "read"]), None);
/// ```
pub fn nearest_name<'a>(given: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    known
        .into_iter()
        .map(|name| (strsim::damerau_levenshtein(given, name), name))
        .filter(|(distance, name)| *distance <= (name.len() / 3).max(1))
        .min()
        .map(|(_, name)| name)
}
