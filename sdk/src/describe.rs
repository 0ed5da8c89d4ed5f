//! [`Describe`]: the builder a tool fills in to describe itself; the SDK
//! turns it into the WIT descriptor, deriving the input schema from the
//! tool's input type.

use crate::{Access, Flags, Interrupt, JsonSchema, Preflight, wit};

/// The default size above which the host spills a result to a file.
pub const DEFAULT_MAX_RESULT_SIZE: u32 = 50_000;

/// How a tool describes itself. Start with [`Describe::new`]; every other
/// field has a safe default (no flags, no capabilities, cancel on interrupt).
#[derive(Debug, Clone)]
pub struct Describe {
    name: String,
    description: String,
    title: Option<String>,
    prompt: Option<String>,
    aliases: Vec<String>,
    flags: Flags,
    interrupt: Interrupt,
    defer_loading: bool,
    max_result_size: u32,
    workspace: Access,
    network_hosts: Vec<String>,
    env_vars: Vec<String>,
    version: Option<String>,
    output_schema: Option<serde_json::Value>,
    name_dialect: bool,
}

/// The JSON Schema dialect the SDK writes schemas in.
const DIALECT: &str = "https://json-schema.org/draft/2020-12/schema";

impl Describe {
    /// A tool named `name` (`^[a-zA-Z0-9_-]{1,64}$`) with a one- or
    /// two-sentence description.
    pub fn new(name: &str, description: &str) -> Self {
        Describe {
            name: name.into(),
            description: description.into(),
            title: None,
            prompt: None,
            aliases: Vec::new(),
            flags: Flags::empty(),
            interrupt: Interrupt::Cancel,
            defer_loading: false,
            max_result_size: DEFAULT_MAX_RESULT_SIZE,
            workspace: Access::None,
            network_hosts: Vec::new(),
            env_vars: Vec::new(),
            version: None,
            output_schema: None,
            name_dialect: false,
        }
    }

    /// The display name (defaults to the name).
    pub fn title(mut self, title: &str) -> Self {
        self.title = Some(title.into());
        self
    }

    /// The full prompt for the model (defaults to the description).
    pub fn prompt(mut self, prompt: &str) -> Self {
        self.prompt = Some(prompt.into());
        self
    }

    /// Another name the tool answers to.
    pub fn alias(mut self, alias: &str) -> Self {
        self.aliases.push(alias.into());
        self
    }

    /// The safety flags for every input.
    pub fn flags(mut self, flags: Flags) -> Self {
        self.flags = flags;
        self
    }

    /// What a user interrupt does to a running call.
    pub fn interrupt(mut self, interrupt: Interrupt) -> Self {
        self.interrupt = interrupt;
        self
    }

    /// List the tool by name only until tool search returns it.
    pub fn defer_loading(mut self, defer: bool) -> Self {
        self.defer_loading = defer;
        self
    }

    /// Results longer than this many characters are spilled to a file.
    pub fn max_result_size(mut self, chars: u32) -> Self {
        self.max_result_size = chars;
        self
    }

    /// Asks for access to the workspace.
    pub fn workspace(mut self, access: Access) -> Self {
        self.workspace = access;
        self
    }

    /// Asks to reach `host` over HTTP (`example.com`, `*.example.com`, `*`).
    pub fn network_host(mut self, host: &str) -> Self {
        self.network_hosts.push(host.into());
        self
    }

    /// Asks to read the environment variable `name`.
    pub fn env_var(mut self, name: &str) -> Self {
        self.env_vars.push(name.into());
        self
    }

    /// The tool's version (defaults to its crate's version).
    pub fn version(mut self, version: &str) -> Self {
        self.version = Some(version.into());
        self
    }

    /// Names the input schema's dialect in it (`"$schema"`, JSON Schema
    /// 2020-12), for clients that check it. Without it the key is left
    /// out: MCP reads a schema that names no dialect as 2020-12, and every
    /// listing of the tool is shorter.
    pub fn name_schema_dialect(mut self) -> Self {
        self.name_dialect = true;
        self
    }

    /// Declares a structured output of type `T`: its JSON Schema, as `T`
    /// serialises, is the tool's output schema. Then every successful
    /// result must carry a `T` ([`Output::structured`](crate::Output::structured)),
    /// and the whole result: MCP clients such as Claude Code show the model
    /// only the structured output when there is one. Use a struct, so the
    /// schema's root is an object, as MCP requires.
    pub fn output_schema<T: JsonSchema>(mut self) -> Self {
        self.output_schema = Some(schema_of::<T>(
            schemars::generate::SchemaSettings::draft2020_12().for_serialize(),
        ));
        self
    }

    /// Builds the WIT descriptor, deriving the input schema from `I`.
    pub(crate) fn into_descriptor<I: JsonSchema>(
        self,
        crate_version: &str,
        preflight: Preflight,
    ) -> wit::Descriptor {
        let mut input_schema = schema_of::<I>(schemars::generate::SchemaSettings::draft2020_12());
        if self.name_dialect
            && let Some(schema) = input_schema.as_object_mut()
        {
            schema.insert("$schema".into(), DIALECT.into());
        }
        wit::Descriptor {
            title: self.title.unwrap_or_else(|| self.name.clone()),
            prompt: self.prompt.unwrap_or_else(|| self.description.clone()),
            name: self.name,
            aliases: self.aliases,
            description: self.description,
            input_schema: input_schema.to_string(),
            output_schema: self.output_schema.map(|s| s.to_string()),
            safety: self.flags,
            interrupt: self.interrupt,
            preflight,
            defer_loading: self.defer_loading,
            max_result_size: self.max_result_size,
            capabilities: wit::Capabilities {
                workspace: self.workspace,
                network_hosts: self.network_hosts,
                env_vars: self.env_vars,
            },
            version: self.version.unwrap_or_else(|| crate_version.into()),
        }
    }
}

/// The JSON Schema of `T` under `settings` (as `T` deserialises, or as it
/// serialises), without the `$schema` and `title` keys (the dialect is
/// 2020-12 everywhere Airlock sends it; the title is the Rust type's name,
/// which means nothing to a model), and without the formats JSON Schema
/// does not define (see [`drop_unknown_formats`]).
fn schema_of<T: JsonSchema>(settings: schemars::generate::SchemaSettings) -> serde_json::Value {
    let mut value = settings
        .into_generator()
        .into_root_schema_for::<T>()
        .to_value();
    if let Some(obj) = value.as_object_mut() {
        obj.remove("$schema");
        obj.remove("title");
    }
    drop_unknown_formats(&mut value);
    value
}

/// The formats JSON Schema 2020-12 defines (its format vocabulary).
const KNOWN_FORMATS: &[&str] = &[
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

/// Removes every `format` that JSON Schema does not define, such as the
/// `uint` and `uint64` schemars gives Rust's integer types: validators in
/// MCP clients (Ajv in the TypeScript SDK, the Inspector) warn about each
/// one, and the range it stands for is already there as `minimum` and
/// `maximum`.
fn drop_unknown_formats(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(obj) => {
            let unknown = obj
                .get("format")
                .and_then(|f| f.as_str())
                .is_some_and(|f| !KNOWN_FORMATS.contains(&f));
            if unknown {
                obj.remove("format");
            }
            obj.values_mut().for_each(drop_unknown_formats);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(drop_unknown_formats),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    /// Doc of the input.
    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Input {
        /// The file.
        file_path: String,
        #[serde(rename = "-i")]
        case_insensitive: Option<bool>,
    }

    #[test]
    fn derives_the_schema_from_the_input_type() {
        let d = Describe::new("t", "A tool.")
            .flags(Flags::READ_ONLY)
            .workspace(Access::Read)
            .into_descriptor::<Input>("1.2.3", Preflight::VALIDATE);
        let schema: serde_json::Value = serde_json::from_str(&d.input_schema).unwrap();
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["required"], serde_json::json!(["file_path"]));
        assert!(schema["properties"]["-i"].is_object());
        assert!(schema.get("$schema").is_none());
        assert_eq!(d.version, "1.2.3");
        assert_eq!(d.title, "t");
        assert_eq!(d.prompt, "A tool.");
        assert_eq!(d.safety, Flags::READ_ONLY);
        assert_eq!(d.preflight, Preflight::VALIDATE);
        assert!(d.output_schema.is_none());
    }

    #[test]
    fn the_dialect_is_named_when_asked() {
        let d = Describe::new("t", "A tool.")
            .name_schema_dialect()
            .into_descriptor::<Input>("1.2.3", Preflight::empty());
        let schema: serde_json::Value = serde_json::from_str(&d.input_schema).unwrap();
        assert_eq!(schema["$schema"], DIALECT);
        assert_eq!(schema["type"], "object");
    }

    /// Doc of the output.
    #[derive(serde::Serialize, JsonSchema)]
    #[allow(dead_code)]
    struct Found {
        /// The files.
        files: Vec<String>,
        /// Set when not every file is listed.
        more: Option<usize>,
        #[serde(skip_serializing_if = "Option::is_none")]
        note: Option<String>,
    }

    #[test]
    fn the_output_schema_describes_the_type_as_it_serialises() {
        let d = Describe::new("t", "A tool.")
            .output_schema::<Found>()
            .into_descriptor::<Input>("1.2.3", Preflight::empty());
        let schema: serde_json::Value =
            serde_json::from_str(&d.output_schema.expect("declared")).unwrap();
        assert_eq!(schema["type"], "object");
        assert!(schema.get("$schema").is_none() && schema.get("title").is_none());
        // Serialised, a `None` is `null` unless it is skipped: so `more` is
        // always there, and `note` may be missing.
        assert_eq!(schema["required"], serde_json::json!(["files", "more"]));
        assert_eq!(schema["properties"]["files"]["description"], "The files.");
    }

    /// Numbers of every width, and formats JSON Schema defines.
    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Numbers {
        small: u8,
        count: u64,
        offset: Option<usize>,
        nested: Vec<Inner>,
        #[schemars(url)]
        link: String,
    }

    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Inner {
        signed: i64,
        ratio: f64,
    }

    #[test]
    fn only_formats_json_schema_defines_are_kept_and_ranges_stay() {
        let d = Describe::new("t", "A tool.").into_descriptor::<Numbers>("1", Preflight::empty());
        let text = d.input_schema;
        for rust_only in ["uint", "int64", "double", "uint8", "uint64"] {
            assert!(
                !text.contains(&format!("\"{rust_only}\"")),
                "format {rust_only} left in {text}"
            );
        }
        let schema: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(schema["properties"]["link"]["format"], "uri");
        assert_eq!(schema["properties"]["small"]["minimum"], 0);
        assert_eq!(schema["properties"]["small"]["maximum"], 255);
        assert_eq!(schema["properties"]["count"]["minimum"], 0);
    }
}
