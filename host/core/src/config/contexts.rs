//! `[contexts]`: where agent contexts are kept and how long they live.

use serde::Deserialize;

/// `[contexts]`: where the agent contexts of MCP 2026-07-28 clients (named
/// by a context id the server hands out) are kept, and how long one lives
/// after its last use.
///
/// ```
/// use airlock_core::config::{Config, ContextStoreUrl};
/// let config = Config::from_toml(r#"
///     [contexts]
///     store = "redis://:secret@10.0.0.5:6380/2"
///     ttl_secs = 3600
/// "#, None).unwrap();
/// let ContextStoreUrl::Redis { host, port, db, password, .. } = &config.contexts.store else {
///     panic!("a Redis store")
/// };
/// assert_eq!((host.as_str(), *port, *db, password.as_deref()), ("10.0.0.5", 6380, 2, Some("secret")));
/// assert_eq!(config.contexts.ttl_secs, 3600);
/// assert!(Config::from_toml("[contexts]\nstore = \"mysql://x\"", None).is_err());
///
/// // The password from a file (a mounted Secret), read when connecting.
/// let config = Config::from_toml(
///     "[contexts]\nstore = \"redis://r:6379\"\npassword_file = \"/etc/airlock-redis/password\"",
///     None,
/// ).unwrap();
/// assert!(config.contexts.password_file.is_some());
/// assert!(Config::from_toml("[contexts]\npassword_file = \"/x\"", None).is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContextsConfig {
    /// `memory` (the default: in this process, nothing to run) or
    /// `redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]` (shared by replicas).
    #[serde(default)]
    pub store: ContextStoreUrl,
    /// Seconds a context lives after its last use (default 86400, a day;
    /// at least 1).
    #[serde(default = "a_day")]
    pub ttl_secs: u64,
    /// A file holding the Redis password (a mounted Kubernetes Secret),
    /// for a `store` URL that names none: read each time a connection is
    /// opened (so a rotated Secret is picked up), its trailing newline
    /// dropped.
    #[serde(default)]
    pub password_file: Option<std::path::PathBuf>,
}

impl ContextsConfig {
    /// What no file has to be read for: a `password_file` for a Redis
    /// store whose URL names no password.
    pub(crate) fn check(&self) -> Result<(), String> {
        match (&self.password_file, &self.store) {
            (None, _) => Ok(()),
            (Some(_), ContextStoreUrl::Redis { password: None, .. }) => Ok(()),
            (Some(_), ContextStoreUrl::Redis { .. }) => {
                Err("contexts.password_file and a password in contexts.store: give one".into())
            }
            (Some(_), ContextStoreUrl::Memory) => {
                Err("contexts.password_file is for a redis:// store".into())
            }
        }
    }
}

impl Default for ContextsConfig {
    fn default() -> Self {
        ContextsConfig {
            store: ContextStoreUrl::Memory,
            ttl_secs: a_day(),
            password_file: None,
        }
    }
}

fn a_day() -> u64 {
    86_400
}

/// Where contexts are kept: `memory` or a `redis://` URL.
#[derive(Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(try_from = "String")]
pub enum ContextStoreUrl {
    /// In this process: lost when it ends, not shared with replicas.
    #[default]
    Memory,
    /// A Redis (or Valkey) server.
    Redis {
        /// Host name or address.
        host: String,
        /// Port (default 6379).
        port: u16,
        /// Database number (default 0).
        db: u32,
        /// ACL user name, with a password.
        username: Option<String>,
        /// Password (`AUTH`).
        password: Option<String>,
    },
}

impl std::fmt::Debug for ContextStoreUrl {
    /// Shown without the password.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_string())
    }
}

impl std::fmt::Display for ContextStoreUrl {
    /// The URL without its password (for logs and errors).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ContextStoreUrl::Memory => f.write_str("memory"),
            ContextStoreUrl::Redis { host, port, db, .. } => {
                write!(f, "redis://{host}:{port}/{db}")
            }
        }
    }
}

impl TryFrom<String> for ContextStoreUrl {
    type Error = String;

    fn try_from(text: String) -> Result<Self, String> {
        if text == "memory" {
            return Ok(ContextStoreUrl::Memory);
        }
        let bad = |why: &str| {
            format!(
                "contexts.store must be \"memory\" or redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]: {why}"
            )
        };
        let Some(rest) = text.strip_prefix("redis://") else {
            return Err(bad("unknown scheme"));
        };
        let (authority, db) = match rest.split_once('/') {
            Some((a, "")) => (a, 0),
            Some((a, db)) => (
                a,
                db.parse()
                    .map_err(|_| bad("the database is not a number"))?,
            ),
            None => (rest, 0),
        };
        let (user, hostport) = match authority.rsplit_once('@') {
            Some((user, hostport)) => (Some(user), hostport),
            None => (None, authority),
        };
        let (username, password) = match user {
            None => (None, None),
            Some(user) => match user.split_once(':') {
                Some(("", pw)) => (None, Some(pw.to_string())),
                Some((name, pw)) => (Some(name.to_string()), Some(pw.to_string())),
                None => return Err(bad("a user needs a password (USER:PASSWORD@)")),
            },
        };
        let (host, port) = match hostport.rsplit_once(':') {
            Some((host, port)) if !host.ends_with(']') || hostport.starts_with('[') => (
                host,
                port.parse().map_err(|_| bad("the port is not a number"))?,
            ),
            _ => (hostport, 6379),
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() {
            return Err(bad("no host"));
        }
        Ok(ContextStoreUrl::Redis {
            host: host.to_string(),
            port,
            db,
            username,
            password,
        })
    }
}
