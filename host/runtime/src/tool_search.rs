//! `tool_search`: the built-in tool that finds deferred tools (Claude Code's
//! ToolSearch).
//!
//! A tool that sets `defer_loading` (in its descriptor, or the operator's
//! `defer_loading` under `[tools.NAME]`) is listed by name only: the model
//! sees `tool_search`, whose prompt names the deferred tools, and calls it
//! with a query to get their full definitions. It searches the calling
//! agent's own view (a sub-agent finds only what it may call), ranks with
//! BM25 over names (weighted), descriptions, prompts and argument names and
//! descriptions, or matches a regular expression, or selects by name
//! (`select:a,b`). Each tool found comes back as a
//! [`ContentBlock::ToolReference`]: Anthropic's `tool_reference` block
//! (the API expands it), the definition as text elsewhere; the MCP server
//! adds it to the session's `tools/list`.
//!
//! It is a [`Tool`] like any other and goes through the same pipeline;
//! read-only, concurrency-safe, and reaching nothing but the tool list.

use airlock_core::descriptor::{Descriptor, SafetyFlags};
use airlock_core::error::CallError;
use airlock_core::tool::{Catalog, ContentBlock, Invocation, Tool, ToolOrigin, ToolOutput};
use async_trait::async_trait;
use serde_json::{Value, json};
use std::collections::HashMap;

/// The tool's name.
pub const NAME: &str = "tool_search";

/// The most tools one search returns.
const MAX_LIMIT: u64 = 20;
/// The longest regular expression accepted (Anthropic's limit).
const MAX_PATTERN: usize = 200;

/// The built-in `tool_search` tool.
pub struct ToolSearch {
    descriptor: Descriptor,
    origin: ToolOrigin,
    /// The BM25 index of the deferred tools of the view this instance
    /// serves (each view gets its own instance), built on first use.
    index: std::sync::OnceLock<Index>,
}

impl ToolSearch {
    /// The tool, with a prompt naming the deferred tools in `tools`.
    pub fn new(tools: &dyn Catalog) -> ToolSearch {
        let deferred: Vec<&str> = deferred(tools).iter().map(|d| d.name.as_str()).collect();
        let mut d = Descriptor::new(
            NAME,
            "Finds deferred tools by keyword, regular expression or name and loads their full definitions, so they can be called.",
        );
        d.title = "Tool search".into();
        d.prompt = format!(
            "{} Some tools are deferred: only their names are listed, and their definitions are loaded on demand. \
             Search before calling one. `query` is keywords (ranked by BM25 over names, descriptions and arguments), \
             or `select:name1,name2` to load tools by name; set `mode` to \"regex\" to match a regular expression \
             (case-insensitive, at most {MAX_PATTERN} characters) instead. Deferred tools: {}.",
            d.description,
            if deferred.is_empty() {
                "none".to_string()
            } else {
                deferred.join(", ")
            }
        );
        d.input_schema = json!({
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 500,
                    "description": "Keywords, `select:name1,name2`, or a regular expression when mode is \"regex\"."
                },
                "mode": {
                    "type": "string",
                    "enum": ["bm25", "regex"],
                    "description": "How to read the query (default bm25)."
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_LIMIT,
                    "description": "The most tools to return (default 5)."
                }
            },
            "required": ["query"],
            "additionalProperties": false
        });
        d.flags = SafetyFlags::READ_ONLY | SafetyFlags::CONCURRENCY_SAFE | SafetyFlags::IDEMPOTENT;
        ToolSearch {
            descriptor: d,
            origin: ToolOrigin::Builtin,
            index: std::sync::OnceLock::new(),
        }
    }
}

#[async_trait]
impl Tool for ToolSearch {
    fn descriptor(&self) -> &Descriptor {
        &self.descriptor
    }

    fn origin(&self) -> &ToolOrigin {
        &self.origin
    }

    async fn call(
        &self,
        invocation: &mut Invocation,
        input: &Value,
    ) -> Result<ToolOutput, CallError> {
        let query = input["query"].as_str().unwrap_or_default().trim();
        let limit = input["limit"].as_u64().unwrap_or(5).clamp(1, MAX_LIMIT) as usize;
        let regex = input["mode"].as_str() == Some("regex");
        let tools = &*invocation.context.tools;
        let index = self.index.get_or_init(|| Index::of(&deferred(tools)));
        let found = search_with(tools, query, regex, limit, Some(index))?;
        Ok(output(tools, query, &found))
    }
}

/// The tools in `tools` that `query` finds, best first, at most `limit`.
/// `select:a,b` names tools (deferred or not); otherwise only deferred
/// tools are searched. A regular expression that does not compile (or is
/// longer than 200 characters) is invalid input.
///
/// ```
/// use airlock_host::{Descriptor, Registry, grants::ToolGrants, tool_search::search};
/// # use std::sync::Arc;
/// # struct Stub(Descriptor, airlock_host::ToolOrigin);
/// # #[async_trait::async_trait]
/// # impl airlock_host::Tool for Stub {
/// #     fn descriptor(&self) -> &Descriptor { &self.0 }
/// #     fn origin(&self) -> &airlock_host::ToolOrigin { &self.1 }
/// #     async fn call(&self, _: &mut airlock_host::tool::Invocation, _: &serde_json::Value)
/// #         -> Result<airlock_host::ToolOutput, airlock_host::CallError> { Ok(airlock_host::ToolOutput::text("sunny")) }
/// # }
/// let mut tools = Registry::new();
/// let mut weather = Descriptor::new("get_weather", "Current weather for a city.");
/// weather.defer_loading = true;
/// let grants = ToolGrants::nothing(&airlock_host::Limits::default());
/// tools.add(Arc::new(Stub(weather, airlock_host::ToolOrigin::Native)), grants).unwrap();
/// let found = search(&tools, "weather in Paris", false, 5).unwrap();
/// assert_eq!(found[0].name, "get_weather");
/// assert!(search(&tools, "(", true, 5).is_err());
/// ```
pub fn search<'r>(
    tools: &'r dyn Catalog,
    query: &str,
    regex: bool,
    limit: usize,
) -> Result<Vec<&'r Descriptor>, CallError> {
    search_with(tools, query, regex, limit, None)
}

/// [`search`], ranking with `index` (of `tools`' deferred tools) when given.
fn search_with<'r>(
    tools: &'r dyn Catalog,
    query: &str,
    regex: bool,
    limit: usize,
    index: Option<&Index>,
) -> Result<Vec<&'r Descriptor>, CallError> {
    if let Some(names) = query.strip_prefix("select:") {
        let mut found: Vec<&Descriptor> = Vec::new();
        for d in names.split(',').filter_map(|n| tools.descriptor(n.trim())) {
            if d.name != NAME && !found.iter().any(|f| f.name == d.name) {
                found.push(d);
            }
        }
        found.truncate(limit);
        return Ok(found);
    }
    if regex {
        let pattern = regex_of(query)?;
        return Ok(deferred(tools)
            .into_iter()
            .filter(|d| fields(d).iter().any(|(text, _)| pattern.is_match(text)))
            .take(limit)
            .collect());
    }
    let index = match index {
        Some(index) => index,
        None => &Index::of(&deferred(tools)),
    };
    Ok(index
        .rank(query, limit)
        .into_iter()
        .filter_map(|name| tools.descriptor(name))
        .collect())
}

/// The deferred tools of `tools`, by name.
fn deferred(tools: &dyn Catalog) -> Vec<&Descriptor> {
    tools
        .descriptors()
        .into_iter()
        .filter(|d| d.defer_loading && d.name != NAME)
        .collect()
}

fn regex_of(query: &str) -> Result<regex::Regex, CallError> {
    if query.chars().count() > MAX_PATTERN {
        return Err(CallError::invalid_input(format!(
            "the pattern is longer than {MAX_PATTERN} characters"
        )));
    }
    regex::RegexBuilder::new(query)
        .case_insensitive(true)
        .size_limit(1 << 20)
        .build()
        .map_err(|e| {
            CallError::invalid_input(format!("the pattern is not a regular expression: {e}"))
        })
}

/// The searchable text of a tool, each with its weight: the name and
/// aliases count three times, a title of its own twice, the description,
/// the prompt (when it says more) and the arguments' names and
/// descriptions once.
fn fields(d: &Descriptor) -> Vec<(&str, f64)> {
    let mut out = vec![(d.name.as_str(), 3.0), (d.description.as_str(), 1.0)];
    if d.title != d.name {
        out.push((&d.title, 2.0));
    }
    if d.prompt != d.description {
        out.push((&d.prompt, 1.0));
    }
    out.extend(d.aliases.iter().map(|a| (a.as_str(), 3.0)));
    if let Some(props) = d.input_schema["properties"].as_object() {
        for (arg, schema) in props {
            out.push((arg, 1.0));
            if let Some(text) = schema["description"].as_str() {
                out.push((text, 1.0));
            }
        }
    }
    out
}

/// Words of `text`, lowercased: split at anything not alphanumeric, and
/// at lower-to-upper case changes (`readFile` is `read`, `file`).
fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut last_lower = false;
    for c in text.chars() {
        if !c.is_alphanumeric() {
            if !word.is_empty() {
                out.push(std::mem::take(&mut word));
            }
            last_lower = false;
            continue;
        }
        if c.is_uppercase() && last_lower && !word.is_empty() {
            out.push(std::mem::take(&mut word));
        }
        last_lower = c.is_lowercase() || c.is_numeric();
        word.extend(c.to_lowercase());
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

/// An inverted Okapi BM25 index (k1 = 1.2, b = 0.75) of tools' weighted
/// fields, built once: for each term, the tools that have it with its
/// weighted frequency; each tool's weighted length.
struct Index {
    names: Vec<String>,
    lens: Vec<f64>,
    postings: HashMap<String, Vec<(usize, f64)>>,
    avg: f64,
}

impl Index {
    fn of(docs: &[&Descriptor]) -> Index {
        let mut postings: HashMap<String, Vec<(usize, f64)>> = HashMap::new();
        let mut lens = Vec::with_capacity(docs.len());
        for (i, d) in docs.iter().enumerate() {
            let mut tf: HashMap<String, f64> = HashMap::new();
            let mut len = 0.0;
            for (text, weight) in fields(d) {
                for w in words(text) {
                    *tf.entry(w).or_default() += weight;
                    len += weight;
                }
            }
            for (term, f) in tf {
                postings.entry(term).or_default().push((i, f));
            }
            lens.push(len);
        }
        let avg = lens.iter().sum::<f64>() / (lens.len().max(1) as f64);
        Index {
            names: docs.iter().map(|d| d.name.clone()).collect(),
            lens,
            postings,
            avg,
        }
    }

    /// The names of the best `limit` tools for `query`, best first; ties in
    /// name order. Tools that match no word are left out.
    fn rank(&self, query: &str, limit: usize) -> Vec<&str> {
        const K1: f64 = 1.2;
        const B: f64 = 0.75;
        let n = self.names.len() as f64;
        let mut query_words = words(query);
        query_words.sort();
        query_words.dedup();
        let mut scores: HashMap<usize, f64> = HashMap::new();
        for q in &query_words {
            let Some(posting) = self.postings.get(q) else {
                continue;
            };
            let df = posting.len() as f64;
            let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
            for &(i, f) in posting {
                let norm = K1 * (1.0 - B + B * self.lens[i] / self.avg.max(1.0));
                *scores.entry(i).or_default() += idf * f * (K1 + 1.0) / (f + norm);
            }
        }
        let mut scored: Vec<(f64, &str)> = scores
            .into_iter()
            .filter(|(_, score)| *score > 0.0)
            .map(|(i, score)| (score, self.names[i].as_str()))
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
        scored.into_iter().take(limit).map(|(_, d)| d).collect()
    }
}

/// A tool's definition as `tool_search` returns it.
pub fn definition(d: &Descriptor) -> Value {
    json!({"name": d.name, "description": d.prompt, "input_schema": d.input_schema})
}

fn output(tools: &dyn Catalog, query: &str, found: &[&Descriptor]) -> ToolOutput {
    if found.is_empty() {
        let deferred: Vec<&str> = deferred(tools).iter().map(|d| d.name.as_str()).collect();
        return ToolOutput::text(format!(
            "No deferred tool matches {query:?}. Deferred tools: {}.",
            if deferred.is_empty() {
                "none".to_string()
            } else {
                deferred.join(", ")
            }
        ));
    }
    let names: Vec<&str> = found.iter().map(|d| d.name.as_str()).collect();
    let mut output = ToolOutput::text(format!(
        "Found {} tool{}: {}. Their definitions are loaded; call them by name.",
        found.len(),
        if found.len() == 1 { "" } else { "s" },
        names.join(", ")
    ));
    output
        .content
        .extend(found.iter().map(|d| ContentBlock::ToolReference {
            name: d.name.clone(),
            definition: definition(d),
        }));
    output
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_split_case_and_punctuation() {
        assert_eq!(
            words("mcp__github__listPRs, read-file"),
            ["mcp", "github", "list", "prs", "read", "file"]
        );
        assert_eq!(words("HTTPServer v2"), ["httpserver", "v2"]);
    }

    fn tool(name: &str, description: &str) -> Descriptor {
        let mut d = Descriptor::new(name, description);
        d.defer_loading = true;
        d
    }

    #[test]
    fn bm25_ranks_the_name_and_rarer_words_higher() {
        let weather = tool("get_weather", "Current weather for a city.");
        let forecast = tool("forecast", "The weather forecast for the next days.");
        let stocks = tool("stock_price", "Share prices for a ticker.");
        let docs = [&weather, &forecast, &stocks];
        let index = Index::of(&docs);
        let names = |q: &str| -> Vec<&str> { index.rank(q, 5) };
        assert_eq!(names("weather"), ["get_weather", "forecast"]);
        assert_eq!(names("forecast weather"), ["forecast", "get_weather"]);
        assert_eq!(names("ticker price"), ["stock_price"]);
        assert!(names("nothing here").is_empty());
        assert_eq!(index.rank("weather", 1).len(), 1);
    }

    #[test]
    fn a_bad_or_long_pattern_is_invalid_input() {
        assert!(regex_of("(unclosed").is_err());
        assert!(regex_of(&"a".repeat(MAX_PATTERN + 1)).is_err());
        assert!(regex_of("^get_.*").unwrap().is_match("GET_weather"));
    }
}
