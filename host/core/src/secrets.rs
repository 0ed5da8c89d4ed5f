//! Secrets: credentials the host adds to a tool's outgoing requests at the
//! sandbox's edge, so the guest never holds them, and takes back out of
//! everything a tool hands on (a response given to the guest, outputs,
//! errors, log lines) as `[secret NAME]`: in any ASCII case, base64 or hex
//! encoded, and with any of its characters written as a server's escapes
//! write them (percent, JSON and JavaScript, HTML; once or nested).
//!
//! [`Secrets::load`] reads `[secrets.NAME]` and checks it against the
//! grants; [`Secrets::injections`] says what one request gets;
//! [`Secrets::redact`] and [`Redactor`] (for a stream) take values out.
//! Knows nothing of HTTP libraries or wasmtime: the engine applies what
//! this module decides.

use crate::config::{Config, SecretConfig, ToolConfig};
use crate::descriptor::{is_env_name, is_host_pattern};
use crate::error::LoadError;
use base64::Engine as _;
use serde_json::Value;
use std::borrow::Cow;
use std::collections::BTreeMap;

/// The shortest value a secret may have: a shorter one (or its encodings)
/// would be found in ordinary text.
pub const MIN_SECRET_BYTES: usize = 8;

/// The configured secrets, with their values, and the matcher that finds
/// them in text. `Debug` never shows a value.
#[derive(Default)]
pub struct Secrets {
    list: Vec<Secret>,
    /// Every form of every value: one group per secret, longest value
    /// first ([`pattern`]).
    matcher: Option<regex::bytes::Regex>,
    /// `[secret NAME]` for each group of `matcher`, in order.
    replacements: Vec<String>,
    /// The longest text `matcher` can match, in bytes.
    longest: usize,
}

struct Secret {
    name: String,
    value: String,
    /// Host names, with an optional `:port`.
    hosts: Vec<String>,
    apply: Apply,
    /// Only these tools' requests get it.
    tools: Option<Vec<String>>,
}

enum Apply {
    Header { name: String, format: String },
    Query { name: String },
}

/// What one outgoing request gets from one secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Injection {
    /// Set this header (replacing any the tool set).
    Header {
        /// The header's name.
        name: String,
        /// Its value, with the secret in it.
        value: String,
    },
    /// Set this query parameter (replacing any the tool set).
    Query {
        /// The parameter's name.
        name: String,
        /// The secret, percent-encoded for a query ([`QUERY_VALUE`]): the
        /// very form redaction looks for.
        encoded: String,
    },
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.list.iter().map(|s| &s.name))
            .finish()
    }
}

impl Secrets {
    /// Reads the values of `config.secrets` and checks them: one source
    /// each (`env` or `file`), named hosts (no wildcards) that some tool is
    /// granted, a header or a query parameter, a value of at least
    /// [`MIN_SECRET_BYTES`] with no control characters, and an environment
    /// variable no tool is granted. Errors name the secret, never its value.
    ///
    /// ```
    /// use airlock_core::config::Config;
    /// use airlock_core::secrets::{Injection, Secrets};
    /// // SAFETY: a doctest, one thread.
    /// unsafe { std::env::set_var("EXAMPLE_TOKEN", "s3cret-t0ken") };
    /// let config = Config::from_toml(r#"
    ///     [tools.fetch]
    ///     network = ["api.example.com"]
    ///     [secrets.example]
    ///     env = "EXAMPLE_TOKEN"
    ///     hosts = ["api.example.com"]
    /// "#, None).unwrap();
    /// let secrets = Secrets::load(&config).unwrap();
    /// assert_eq!(
    ///     secrets.injections("fetch", "https", "api.example.com", Some(443)),
    ///     [Injection::Header { name: "Authorization".into(), value: "Bearer s3cret-t0ken".into() }],
    /// );
    /// // Plain HTTP to a host off this machine gets nothing.
    /// assert!(secrets.injections("fetch", "http", "api.example.com", Some(80)).is_empty());
    /// assert_eq!(secrets.redact("token: czNjcmV0LXQwa2Vu"), "token: [secret example]");
    /// ```
    pub fn load(config: &Config) -> Result<Secrets, LoadError> {
        let mut list = Vec::new();
        for (name, sc) in &config.secrets {
            list.push(load_one(name, sc, &config.tools)?);
        }
        Secrets::from_list(list)
    }

    fn from_list(mut list: Vec<Secret>) -> Result<Secrets, LoadError> {
        // Leftmost-first: a longer value containing a shorter one is found
        // whole when it is tried first.
        list.sort_by_key(|s| std::cmp::Reverse(s.value.len()));
        let replacements = list
            .iter()
            .map(|s| format!("[secret {}]", s.name))
            .collect();
        let longest = list
            .iter()
            .map(|s| longest_form(&s.value))
            .max()
            .unwrap_or(0);
        let matcher = if list.is_empty() {
            None
        } else {
            let groups: Vec<String> = list
                .iter()
                .map(|s| format!("({})", pattern(&s.value)))
                .collect();
            let built = regex::bytes::RegexBuilder::new(&format!("(?i-u){}", groups.join("|")))
                .size_limit(MATCHER_BYTES)
                .build()
                .map_err(|_| {
                    LoadError::Grants(format!(
                        "secrets: the values are too long together to be found in every form \
                         (their matcher would pass {} MiB)",
                        MATCHER_BYTES >> 20
                    ))
                })?;
            Some(built)
        };
        Ok(Secrets {
            list,
            matcher,
            replacements,
            longest,
        })
    }

    /// `[secret NAME]` for the secret a match of `matcher` found.
    fn replacement(&self, found: &regex::bytes::Captures<'_>) -> &str {
        let group = (1..found.len())
            .find(|&i| found.get(i).is_some())
            .expect("every match is one secret's group");
        &self.replacements[group - 1]
    }

    /// Whether no secret is configured.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// What a request from `tool` to `scheme://host:port` gets: every
    /// secret for that host (and that tool), when the request is HTTPS or
    /// stays on this machine (a loopback host). The caller has already
    /// checked that the tool may reach the host at all.
    pub fn injections(
        &self,
        tool: &str,
        scheme: &str,
        host: &str,
        port: Option<u16>,
    ) -> Vec<Injection> {
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase();
        if !scheme.eq_ignore_ascii_case("https") && !is_loopback(&host) {
            return Vec::new();
        }
        self.list
            .iter()
            .filter(|s| s.tools.as_ref().is_none_or(|t| t.iter().any(|t| t == tool)))
            .filter(|s| s.hosts.iter().any(|h| host_is(h, &host, port)))
            .map(|s| match &s.apply {
                Apply::Header { name, format } => Injection::Header {
                    name: name.clone(),
                    value: format.replace("{value}", &s.value),
                },
                Apply::Query { name } => Injection::Query {
                    name: name.clone(),
                    encoded: percent_encoding::utf8_percent_encode(&s.value, QUERY_VALUE)
                        .to_string(),
                },
            })
            .collect()
    }

    /// `text` with every secret (and each of its encodings) replaced by
    /// `[secret NAME]`.
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        match self.redact_bytes(text.as_bytes()) {
            Cow::Borrowed(_) => Cow::Borrowed(text),
            // Every form begins and ends on a whole character.
            Cow::Owned(clean) => Cow::Owned(
                String::from_utf8(clean)
                    .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
            ),
        }
    }

    /// Whether `text` carries a secret, in any of its forms.
    pub fn contains(&self, text: &str) -> bool {
        self.matcher
            .as_ref()
            .is_some_and(|m| m.is_match(text.as_bytes()))
    }

    /// [`Secrets::redact`] for bytes.
    pub fn redact_bytes<'a>(&self, bytes: &'a [u8]) -> Cow<'a, [u8]> {
        match &self.matcher {
            Some(m) => m.replace_all(bytes, |found: &regex::bytes::Captures<'_>| {
                self.replacement(found).as_bytes().to_vec()
            }),
            None => Cow::Borrowed(bytes),
        }
    }

    /// Guest text for `sink`: cleaned first ([`crate::sanitize`]: so no
    /// invisible character inside a value hides it), then redacted, then
    /// capped at `max_chars` (so no cut leaves part of a value).
    pub fn clean(&self, text: &str, sink: crate::sanitize::Sink, max_chars: usize) -> String {
        let cleaned = crate::sanitize::clean(text, sink).text;
        crate::sanitize::cap(&self.redact(&cleaned), max_chars)
    }

    /// [`Secrets::redact`] in place.
    pub fn redact_in_place(&self, text: &mut String) {
        if let Cow::Owned(clean) = self.redact(text) {
            *text = clean;
        }
    }

    /// Every string (and object key) of `value`, redacted.
    pub fn redact_json(&self, value: &mut Value) {
        if self.matcher.is_none() {
            return;
        }
        match value {
            Value::String(s) => self.redact_in_place(s),
            Value::Array(items) => items.iter_mut().for_each(|v| self.redact_json(v)),
            Value::Object(map) => {
                if map.keys().any(|k| matches!(self.redact(k), Cow::Owned(_))) {
                    let old = std::mem::take(map);
                    for (k, v) in old {
                        map.insert(self.redact(&k).into_owned(), v);
                    }
                }
                map.values_mut().for_each(|v| self.redact_json(v));
            }
            _ => {}
        }
    }
}

/// Takes secrets out of a stream of bytes (a response body) chunk by chunk:
/// a value split across two chunks is still found.
#[derive(Debug)]
pub struct Redactor {
    secrets: std::sync::Arc<Secrets>,
    /// The end of what came so far, which may start a value.
    carry: Vec<u8>,
}

impl Redactor {
    /// A redactor of `secrets`.
    pub fn new(secrets: std::sync::Arc<Secrets>) -> Redactor {
        Redactor {
            secrets,
            carry: Vec::new(),
        }
    }

    /// The redacted bytes that can be handed on after `chunk`; the last
    /// few are held back until the next chunk or [`Redactor::finish`].
    pub fn push(&mut self, chunk: &[u8]) -> Vec<u8> {
        let Some(matcher) = &self.secrets.matcher else {
            return chunk.to_vec();
        };
        self.carry.extend_from_slice(chunk);
        let buf = std::mem::take(&mut self.carry);
        // A match starting before `cut` lies wholly in `buf`.
        let mut cut = buf.len().saturating_sub(self.secrets.longest - 1);
        let mut out = Vec::with_capacity(buf.len());
        let mut at = 0;
        for found in matcher.captures_iter(&buf) {
            let m = found.get(0).expect("a match has its whole");
            if m.start() >= cut {
                break;
            }
            out.extend_from_slice(&buf[at..m.start()]);
            out.extend_from_slice(self.secrets.replacement(&found).as_bytes());
            at = m.end();
            cut = cut.max(m.end());
        }
        out.extend_from_slice(&buf[at..cut]);
        self.carry = buf[cut..].to_vec();
        out
    }

    /// The secrets it takes out.
    pub fn secrets(&self) -> &Secrets {
        &self.secrets
    }

    /// The rest, redacted, at the end of the stream.
    pub fn finish(&mut self) -> Vec<u8> {
        let rest = std::mem::take(&mut self.carry);
        self.secrets.redact_bytes(&rest).into_owned()
    }
}

fn load_one(
    name: &str,
    sc: &SecretConfig,
    tools: &BTreeMap<String, ToolConfig>,
) -> Result<Secret, LoadError> {
    let err = |m: String| LoadError::Grants(format!("secrets.{name}: {m}"));
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return Err(LoadError::Grants(format!(
            "secrets.{name:?}: a secret's name is letters, digits, `_` and `-`"
        )));
    }
    let value = match (&sc.env, &sc.file) {
        (Some(var), None) => {
            if !is_env_name(var) {
                return Err(err(format!("{var:?} is not an environment variable name")));
            }
            if let Some((tool, _)) = tools.iter().find(|(_, tc)| tc.env.contains(var)) {
                return Err(err(format!(
                    "its value comes from ${var}, which tools.{tool}.env grants: the tool \
                     could read it (grant the secret instead, and not the variable)"
                )));
            }
            std::env::var(var).map_err(|_| err(format!("${var} is not set (or not UTF-8)")))?
        }
        (None, Some(file)) => {
            let mut text = std::fs::read_to_string(file)
                .map_err(|e| err(format!("cannot read {}: {e}", file.display())))?;
            if text.ends_with('\n') {
                text.pop();
                if text.ends_with('\r') {
                    text.pop();
                }
            }
            text
        }
        _ => return Err(err("give exactly one of `env` and `file`".into())),
    };
    if value.len() < MIN_SECRET_BYTES {
        return Err(err(format!(
            "the value is shorter than {MIN_SECRET_BYTES} bytes: too short to find and redact \
             reliably"
        )));
    }
    if value.chars().any(char::is_control) {
        return Err(err(
            "the value holds a control character (such as a line break)".into(),
        ));
    }
    if sc.hosts.is_empty() {
        return Err(err("`hosts` names no host to send it to".into()));
    }
    let mut hosts = Vec::new();
    for host in &sc.hosts {
        if host.contains('*') || !is_host_pattern(host) {
            return Err(err(format!(
                "{host:?} is not a host name (`name` or `name:port`): a secret goes only to \
                 hosts named one by one, never to a wildcard"
            )));
        }
        let host = host.to_ascii_lowercase();
        let (h, port) = split_port(&host);
        let reached_by = |tool: &str| {
            let tc = ToolConfig::of(tools, tool);
            tc.enabled != Some(false) && tc.network.iter().any(|g| grant_covers(g, h, port))
        };
        let reachable = match &sc.tools {
            Some(only) => only.iter().any(|t| reached_by(t)),
            None => tools.keys().any(|t| reached_by(t)),
        };
        if !reachable {
            return Err(err(format!(
                "no tool may reach {host} (no `network` grant covers it), so the secret would \
                 never be sent: grant the host to the tool that needs it"
            )));
        }
        hosts.push(host);
    }
    let apply = match (&sc.header, &sc.query) {
        (Some(_), Some(_)) => {
            return Err(err(
                "give `header` or `query`, not both: the secret goes in one place".into(),
            ));
        }
        (_, Some(query)) => {
            if sc.format.is_some() {
                return Err(err("`format` is for a header, not a query parameter".into()));
            }
            if query.is_empty()
                || !query
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b))
            {
                return Err(err(format!(
                    "{query:?} is not a query parameter name (letters, digits, `-._~`)"
                )));
            }
            Apply::Query {
                name: query.clone(),
            }
        }
        (header, None) => {
            let header = header.clone().unwrap_or_else(|| "Authorization".into());
            if header.is_empty() || !header.bytes().all(is_token_byte) {
                return Err(err(format!("{header:?} is not a header name")));
            }
            let format = sc.format.clone().unwrap_or_else(|| "Bearer {value}".into());
            if !format.contains("{value}") {
                return Err(err(format!(
                    "the format {format:?} has no `{{value}}` for the secret"
                )));
            }
            if format.chars().any(char::is_control) {
                return Err(err("the format holds a control character".into()));
            }
            if !value.bytes().all(|b| b.is_ascii_graphic() || b == b' ')
                || !format.bytes().all(|b| b.is_ascii_graphic() || b == b' ')
            {
                return Err(err(
                    "a header's value is printable ASCII: the value (or format) has other \
                     characters (put it in a query parameter, which is percent-encoded)"
                        .into(),
                ));
            }
            Apply::Header {
                name: header,
                format,
            }
        }
    };
    Ok(Secret {
        name: name.to_string(),
        value,
        hosts,
        apply,
        tools: sc.tools.clone(),
    })
}

/// The most a compiled matcher of every secret may take: a value of a
/// few thousand characters fits.
const MATCHER_BYTES: usize = 64 << 20;

/// The longest text one character of a value can be written as in
/// [`char_forms`]: four escaped backslashes (48 bytes) before a nested
/// HTML reference with its punctuation escaped (77).
const LONGEST_CHAR_FORM: usize = 128;

/// The regular expression (ASCII case-insensitive, bytes) of every form
/// of `value` that text may carry it in: the value's bytes in base64
/// (standard and URL-safe, padded or not, at each of the three alignments
/// it can have inside a longer encoding) or in hex; or its characters one
/// after another, each as it is or escaped ([`char_forms`]), so that any
/// mixture of escapes a server applies is found.
fn pattern(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut encoded = vec![hex(bytes)];
    let engines = [
        base64::engine::general_purpose::STANDARD,
        base64::engine::general_purpose::URL_SAFE,
    ];
    for engine in &engines {
        encoded.push(engine.encode(bytes));
    }
    let unpadded = [
        base64::engine::general_purpose::STANDARD_NO_PAD,
        base64::engine::general_purpose::URL_SAFE_NO_PAD,
    ];
    for engine in &unpadded {
        for skip in 0..3 {
            // Whole groups of three bytes only: the characters they encode
            // do not depend on what comes before or after.
            let rest = &bytes[skip.min(bytes.len())..];
            let whole = rest.len() / 3 * 3;
            if whole >= 6 {
                encoded.push(engine.encode(&rest[..whole]));
            }
        }
    }
    encoded.sort();
    encoded.dedup();
    let mut alternatives: Vec<String> = encoded.iter().map(|e| regex::escape(e)).collect();
    alternatives.push(value.chars().map(char_forms).collect());
    alternatives.join("|")
}

/// The longest text [`pattern`] matches for `value`.
fn longest_form(value: &str) -> usize {
    let base64 = value.len().div_ceil(3) * 4;
    (value.chars().count() * LONGEST_CHAR_FORM)
        .max(base64)
        .max(2 * value.len())
}

/// Every way one character `c` is commonly written, alone or after up to
/// four backslashes (an escape, or a JSON string escaped again): as it
/// is; percent-encoded (each UTF-8 byte, the `%` itself encoded up to twice
/// more, `+` for a space); as a JSON or JavaScript escape (`uXXXX`, a
/// surrogate pair above the BMP, `xXX`); as an HTML character reference
/// (decimal, hex, or named for `& < > " '`, the `&` itself escaped up to
/// twice more). The backslashes and the references' punctuation may be
/// escaped in turn ([`punct`]), as a second encoding leaves them.
fn char_forms(c: char) -> String {
    let backslash = punct(b'\\');
    let mut utf8 = [0; 4];
    let bytes = c.encode_utf8(&mut utf8).as_bytes();
    let literal = if c.is_ascii() {
        regex::escape(c.encode_utf8(&mut [0; 4]))
    } else {
        bytes.iter().map(|b| format!(r"\x{b:02x}")).collect()
    };
    let percent: String = bytes.iter().map(|b| format!("{PERCENT}{b:02x}")).collect();
    let mut forms = vec![literal, percent];
    if c == ' ' {
        forms.push(r"\+".into());
    }
    let mut units = [0; 2];
    let json: Vec<String> = c
        .encode_utf16(&mut units)
        .iter()
        .map(|u| format!("u{u:04x}"))
        .collect();
    forms.push(json.join(&format!("{backslash}{{1,4}}")));
    let code = u32::from(c);
    if code <= 0xff {
        forms.push(format!("x{code:02x}"));
    }
    let (amp, hash, semi) = (punct(b'&'), punct(b'#'), punct(b';'));
    let amp = format!("{amp}(?:amp{semi}){{0,2}}");
    forms.push(format!("{amp}{hash}0{{0,4}}{code}{semi}"));
    forms.push(format!("{amp}{hash}x0{{0,4}}{code:x}{semi}"));
    let named = match c {
        '&' => Some("amp"),
        '<' => Some("lt"),
        '>' => Some("gt"),
        '"' => Some("quot"),
        '\'' => Some("apos"),
        _ => None,
    };
    if let Some(name) = named {
        forms.push(format!("{amp}{name}{semi}"));
    }
    format!("{backslash}{{0,4}}(?:{})", forms.join("|"))
}

/// A percent sign (or its JavaScript escape), itself percent-encoded up
/// to twice more: at most 10 bytes.
const PERCENT: &str = r"(?:%|\\x25|\\u0025)(?:25){0,2}";

/// The ASCII punctuation `byte` as it is, percent-encoded ([`PERCENT`]),
/// as a JavaScript escape (`\xHH`, `\u00HH`) or as an HTML reference
/// (`&#DD;`, `&#xHH;`): at most 12 bytes.
fn punct(byte: u8) -> String {
    format!(
        r"(?:\x{byte:02x}|{PERCENT}{byte:02x}|\\x{byte:02x}|\\u00{byte:02x}|&#0{{0,4}}{byte};|&#x0{{0,4}}{byte:02x};)"
    )
}

/// `bytes` in lowercase hex (matched in any case).
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// How an injected query parameter's value is encoded: all but letters,
/// digits and `-._~` (RFC 3986's unreserved characters).
pub const QUERY_VALUE: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$&'*+-.^_`|~".contains(&b)
}

fn is_loopback(host: &str) -> bool {
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

fn split_port(host: &str) -> (&str, Option<u16>) {
    match host.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') => (h, p.parse().ok()),
        _ => (host, None),
    }
}

/// Whether the secret's `host` (`name` or `name:port`) is the request's.
fn host_is(host: &str, request_host: &str, port: Option<u16>) -> bool {
    let (h, p) = split_port(host);
    h == request_host && (p.is_none() || p == port)
}

/// Whether the grant pattern `grant` lets a tool reach `host` (on `port`,
/// or on every port when `None`).
fn grant_covers(grant: &str, host: &str, port: Option<u16>) -> bool {
    let grant = grant.to_ascii_lowercase();
    if grant == "*" {
        return true;
    }
    let (g, gp) = split_port(&grant);
    if gp.is_some() && gp != port {
        return false;
    }
    match g.strip_prefix("*.") {
        Some(suffix) => host.len() > suffix.len() + 1 && host.ends_with(&format!(".{suffix}")),
        None => g == host,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    pub(crate) const VALUE: &str = "tok/en+with=odd chars 123";

    /// One secret, `api`, of the value [`VALUE`].
    pub(crate) fn secrets() -> Arc<Secrets> {
        Arc::new(
            Secrets::from_list(vec![Secret {
                name: "api".into(),
                value: VALUE.into(),
                hosts: vec!["api.example.com".into(), "localhost:8080".into()],
                apply: Apply::Header {
                    name: "X-Key".into(),
                    format: "{value}".into(),
                },
                tools: Some(vec!["fetch".into()]),
            }])
            .unwrap(),
        )
    }

    use std::sync::Arc;

    #[test]
    fn every_encoding_at_every_alignment_is_redacted() {
        let s = secrets();
        let b64 = |e: &base64::engine::GeneralPurpose, prefix: &str| {
            e.encode(format!("{prefix}{VALUE}").as_bytes())
        };
        for engine in [
            &base64::engine::general_purpose::STANDARD,
            &base64::engine::general_purpose::URL_SAFE,
        ] {
            for prefix in ["", "u", "us", "user:"] {
                let text = format!("header: Basic {}.", b64(engine, prefix));
                let clean = s.redact(&text);
                assert!(clean.contains("[secret api]"), "{prefix:?}: {clean}");
                // What is left of the encoding holds at most the two bytes
                // on either side that share a group with other bytes.
                let left = clean.split("[secret api]").map(str::len).sum::<usize>();
                assert!(
                    left <= "header: Basic .".len() + 8 + 4 * prefix.len(),
                    "{clean}"
                );
            }
        }
        for text in [
            "tok%2Fen%2Bwith%3Dodd%20chars%20123",
            "tok%2fen%2bwith%3dodd%20chars%20123",
            "tok%2Fen%2Bwith%3Dodd+chars+123",
            VALUE,
        ] {
            assert_eq!(s.redact(&format!("a {text} b")), "a [secret api] b");
        }
        assert!(matches!(s.redact("nothing here"), Cow::Borrowed(_)));
    }

    #[test]
    fn a_query_secret_is_sent_in_a_form_redaction_finds() {
        let value = "it's(a)*secret!~";
        let s = Secrets::from_list(vec![Secret {
            name: "q".into(),
            value: value.into(),
            hosts: vec!["api.example.com".into()],
            apply: Apply::Query { name: "key".into() },
            tools: None,
        }])
        .unwrap();
        let injections = s.injections("t", "https", "api.example.com", None);
        let [Injection::Query { encoded, .. }] = &injections[..] else {
            panic!("one query injection: {injections:?}")
        };
        assert_eq!(encoded, "it%27s%28a%29%2Asecret%21~");
        assert_eq!(
            s.redact(&format!(
                "Location: https://api.example.com/x?key={encoded}"
            )),
            "Location: https://api.example.com/x?key=[secret q]"
        );
    }

    #[test]
    fn injections_go_to_named_hosts_over_https_or_loopback_for_named_tools() {
        let s = secrets();
        let header = vec![Injection::Header {
            name: "X-Key".into(),
            value: VALUE.into(),
        }];
        assert_eq!(
            s.injections("fetch", "https", "API.example.com", None),
            header
        );
        assert_eq!(
            s.injections("fetch", "http", "localhost", Some(8080)),
            header
        );
        assert!(
            s.injections("fetch", "http", "api.example.com", Some(80))
                .is_empty()
        );
        assert!(
            s.injections("fetch", "http", "localhost", Some(8081))
                .is_empty()
        );
        assert!(
            s.injections("other", "https", "api.example.com", None)
                .is_empty()
        );
        assert!(
            s.injections("fetch", "https", "x.api.example.com", None)
                .is_empty()
        );
        assert!(
            s.injections("fetch", "https", "api.example.com.evil", None)
                .is_empty()
        );
    }

    /// A secret with the characters servers escape: quotes, a backslash,
    /// `<&>`, a space and a non-ASCII letter.
    const AWKWARD: &str = "p@ss\"w\\rd<&>'x é9";

    fn awkward() -> Secrets {
        Secrets::from_list(vec![Secret {
            name: "k".into(),
            value: AWKWARD.into(),
            hosts: vec!["api.example.com".into()],
            apply: Apply::Query { name: "key".into() },
            tools: None,
        }])
        .unwrap()
    }

    /// Ways a server hands back what it got, one after another: `json`
    /// is a JSON string's inside.
    fn json(text: &str) -> String {
        let quoted = serde_json::to_string(text).unwrap();
        quoted[1..quoted.len() - 1].to_string()
    }
    fn json_ascii(text: &str) -> String {
        text.chars()
            .map(|c| match c {
                c if c.is_ascii_alphanumeric() => c.to_string(),
                c => c
                    .encode_utf16(&mut [0; 2])
                    .iter()
                    .map(|u| format!("\\u{u:04X}"))
                    .collect(),
            })
            .collect()
    }
    fn html(text: &str) -> String {
        text.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
            .replace('"', "&quot;")
            .replace('\'', "&#x27;")
    }
    fn html_numeric(text: &str) -> String {
        text.chars()
            .map(|c| match c {
                '&' | '<' | '>' | '"' | '\'' | 'é' => format!("&#{};", u32::from(c)),
                c => c.to_string(),
            })
            .collect()
    }
    fn percent(text: &str) -> String {
        percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC).to_string()
    }
    fn js_hex(text: &str) -> String {
        text.chars()
            .map(|c| match c {
                c if c.is_ascii_alphanumeric() => c.to_string(),
                c if u32::from(c) <= 0xff => format!("\\x{:02x}", u32::from(c)),
                c => c.to_string(),
            })
            .collect()
    }

    #[test]
    fn escaped_forms_a_server_writes_are_redacted() {
        let s = awkward();
        let hex_upper: String = AWKWARD.bytes().map(|b| format!("{b:02X}")).collect();
        let forms = [
            AWKWARD.to_string(),
            AWKWARD.to_ascii_uppercase(),
            json(AWKWARD),
            json(&json(AWKWARD)),
            json_ascii(AWKWARD),
            html(AWKWARD),
            html(&html(AWKWARD)),
            html_numeric(AWKWARD),
            html(&json(AWKWARD)),
            json(&html(AWKWARD)),
            percent(AWKWARD),
            percent(&percent(AWKWARD)),
            percent(&json(AWKWARD)),
            js_hex(AWKWARD),
            hex_upper,
            base64::engine::general_purpose::STANDARD.encode(AWKWARD),
        ];
        for form in forms {
            let text = format!("{{\"echo\": {form} }}");
            let clean = s.redact(&text);
            assert_eq!(clean, "{\"echo\": [secret k] }", "{form}");
            assert!(s.contains(&text));
        }
        // A header's name arrives in lowercase.
        let name = format!("x-{}", percent(AWKWARD).to_ascii_lowercase());
        assert!(s.contains(&name), "{name}");
    }

    /// One character of [`AWKWARD`] changed is not it.
    #[test]
    fn near_misses_are_left_alone() {
        let s = awkward();
        for near in [
            AWKWARD.replace('é', "e"),
            AWKWARD.replace('"', "'"),
            json(&AWKWARD[1..]),
            html(&AWKWARD.replace('x', "y")),
        ] {
            assert!(!s.contains(&near), "{near}");
            assert!(matches!(s.redact(&near), Cow::Borrowed(_)));
        }
    }

    proptest! {
        /// Whatever value, and whatever chain of escapes and case a server
        /// applies to it, the text it writes back is redacted; and however
        /// that text is cut into a stream, it is redacted as a whole.
        #[test]
        fn a_value_escaped_any_way_is_redacted(
            value in "[a-zA-Z0-9 \"\\\\<>&'/+=%é€😀]{8,24}",
            steps in proptest::collection::vec(0usize..8, 0..3),
            cuts in proptest::collection::vec(0usize..400, 0..6),
        ) {
            let s = Secrets::from_list(vec![Secret {
                name: "v".into(),
                value: value.clone(),
                hosts: vec!["h.example".into()],
                apply: Apply::Query { name: "key".into() },
                tools: None,
            }]).unwrap();
            let mut text = value.clone();
            for step in steps {
                text = match step {
                    0 => json(&text),
                    1 => json_ascii(&text),
                    2 => html(&text),
                    3 => html_numeric(&text),
                    4 => percent(&text),
                    5 => js_hex(&text),
                    6 => text.to_ascii_uppercase(),
                    _ => text.to_ascii_lowercase(),
                };
            }
            let text = format!("#{{{text}}}#");
            let clean = s.redact(&text).into_owned();
            prop_assert!(clean.starts_with("#{") && clean.ends_with("}#"), "{}", clean);
            prop_assert!(clean.contains("[secret v]"), "{} from {}", clean, text);
            prop_assert_eq!(streamed(Arc::new(s), &text, cuts), clean);
        }
    }

    proptest! {
        /// However a stream is cut into chunks, the redactor gives what
        /// redacting it whole gives.
        #[test]
        fn a_stream_redacts_as_a_whole(
            before in "[a-z ]{0,40}",
            after in "[a-z ]{0,40}",
            cuts in proptest::collection::vec(0usize..120, 0..8),
        ) {
            let s = secrets();
            let b64 = base64::engine::general_purpose::STANDARD.encode(VALUE);
            let text = format!("{before}{VALUE}{after}{b64}{before}");
            prop_assert_eq!(streamed(s.clone(), &text, cuts), s.redact(&text).into_owned());
        }
    }

    /// `text` redacted by a [`Redactor`] of `secrets`, fed in chunks cut
    /// at `cuts` (past the end: at the end).
    fn streamed(secrets: Arc<Secrets>, text: &str, cuts: Vec<usize>) -> String {
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(text.len())).collect();
        cuts.sort();
        let mut redactor = Redactor::new(secrets);
        let mut out = Vec::new();
        let mut at = 0;
        for cut in cuts.into_iter().chain([text.len()]) {
            out.extend(redactor.push(&text.as_bytes()[at..cut]));
            at = cut;
        }
        out.extend(redactor.finish());
        String::from_utf8(out).expect("redaction keeps whole characters")
    }

    fn config(toml: &str) -> Config {
        Config::from_toml(toml, None).unwrap()
    }

    fn refused(toml: &str) -> String {
        Secrets::load(&config(toml)).unwrap_err().to_string()
    }

    #[test]
    fn misconfigurations_are_refused_naming_the_secret() {
        let dir = std::env::temp_dir().join(format!("airlock-secret-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("token");
        std::fs::write(&file, "long-enough-value\n").unwrap();
        let short = dir.join("short");
        std::fs::write(&short, "short\n").unwrap();
        let grant = "[tools.fetch]\nnetwork = [\"api.example.com\"]\n";
        let ok = format!("{grant}[secrets.s]\nfile = {file:?}\nhosts = [\"api.example.com\"]\n");
        let loaded = Secrets::load(&config(&ok)).unwrap();
        assert_eq!(
            loaded.injections("fetch", "https", "api.example.com", None),
            [Injection::Header {
                name: "Authorization".into(),
                value: "Bearer long-enough-value".into()
            }]
        );
        for (toml, expected) in [
            (
                format!("{grant}[secrets.s]\nfile = {file:?}\nhosts = [\"*.example.com\"]\n"),
                "never to a wildcard",
            ),
            (
                format!("{grant}[secrets.s]\nfile = {file:?}\nhosts = [\"other.example.com\"]\n"),
                "no tool may reach other.example.com",
            ),
            (
                format!("{grant}[secrets.s]\nfile = {short:?}\nhosts = [\"api.example.com\"]\n"),
                "shorter than 8 bytes",
            ),
            (
                format!("{grant}[secrets.s]\nhosts = [\"api.example.com\"]\n"),
                "exactly one of `env` and `file`",
            ),
            (
                format!(
                    "{grant}[secrets.s]\nfile = {file:?}\nhosts = [\"api.example.com\"]\n\
                     query = \"k\"\nheader = \"X\"\n"
                ),
                "not both",
            ),
            (
                format!(
                    "{grant}[secrets.s]\nfile = {file:?}\nhosts = [\"api.example.com\"]\n\
                     format = \"Bearer\"\n"
                ),
                "has no `{value}`",
            ),
            (
                format!(
                    "{grant}[secrets.s]\nfile = {file:?}\nhosts = [\"api.example.com\"]\n\
                     tools = [\"other\"]\n"
                ),
                "no tool may reach api.example.com",
            ),
            (
                format!(
                    "{grant}env = [\"TOKEN\"]\n[secrets.s]\nenv = \"TOKEN\"\n\
                     hosts = [\"api.example.com\"]\n"
                ),
                "tools.fetch.env grants: the tool could read it",
            ),
            (
                format!(
                    "{grant}[secrets.s]\nenv = \"AIRLOCK_TEST_UNSET_TOKEN\"\n\
                     hosts = [\"api.example.com\"]\n"
                ),
                "$AIRLOCK_TEST_UNSET_TOKEN is not set",
            ),
        ] {
            let message = refused(&toml);
            assert!(
                message.contains("secrets.s: ") && message.contains(expected),
                "{expected}: {message}"
            );
            assert!(!message.contains("long-enough-value"), "{message}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
