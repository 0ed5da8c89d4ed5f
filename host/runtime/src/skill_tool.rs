//! `skill`: the built-in tool that gives a skill to the model (Claude
//! Code's SkillTool), for clients and embedders that do not speak MCP's
//! Skills extension.
//!
//! Its prompt lists each skill's name and description; called with a
//! skill's name, it returns that skill's instructions (`SKILL.md` after its
//! front matter), where `bash` sees its folder (mounted
//! read-only at [`mount_path`], or in the workspace), and the list of its
//! other files, each by its `skill://` URI (which an MCP client reads with
//! `resources/read`). Offered when there is a skill, and deferred (found
//! through `tool_search`) above [`DEFER_ABOVE`] skills; read-only,
//! concurrency-safe, and reaching nothing but the skills loaded at start.

use airlock_core::descriptor::{Descriptor, SafetyFlags};
use airlock_core::error::CallError;
use airlock_core::grants::Grants;
use airlock_core::skills::Skills;
use airlock_core::tool::{Invocation, Tool, ToolOrigin, ToolOutput};
use async_trait::async_trait;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;

/// The tool's name.
pub const NAME: &str = "skill";

/// Above this many skills the tool is deferred (its description, which
/// lists them all, is loaded through `tool_search` when needed), as
/// Claude Code defers tools whose definitions would crowd the context.
pub const DEFER_ABOVE: usize = 20;

/// The built-in `skill` tool.
pub struct SkillTool {
    descriptor: Descriptor,
    origin: ToolOrigin,
    skills: Arc<Skills>,
    /// Where [`RUNNERS`] see each skill's folder, by name: its mount, or
    /// its place in the workspace.
    folders: HashMap<String, String>,
}

impl SkillTool {
    /// The tool over `skills`, with a prompt listing them; `grants` say
    /// where the tools that run a skill's scripts see its folder.
    pub fn new(skills: Arc<Skills>, grants: &Grants) -> SkillTool {
        let mut d = Descriptor::new(
            NAME,
            "Loads a skill: the instructions for a task, and the files they use.",
        );
        d.title = "Skill".into();
        let listed: Vec<String> = skills
            .skills
            .iter()
            .map(|s| format!("- {}: {}", s.name, s.description))
            .collect();
        d.prompt = format!(
            "{} When a task matches a skill's description, load the skill first and follow its \
             instructions. Skills:\n{}",
            d.description,
            listed.join("\n")
        );
        let names: Vec<&str> = skills.skills.iter().map(|s| s.name.as_str()).collect();
        d.input_schema = json!({
            "type": "object",
            "properties": {
                "skill": {
                    "type": "string",
                    "enum": names,
                    "description": "The skill's name."
                }
            },
            "required": ["skill"],
            "additionalProperties": false
        });
        d.flags = SafetyFlags::READ_ONLY | SafetyFlags::CONCURRENCY_SAFE | SafetyFlags::IDEMPOTENT;
        d.defer_loading = skills.skills.len() > DEFER_ABOVE;
        let folders = folders(&skills, grants);
        SkillTool {
            descriptor: d,
            origin: ToolOrigin::Builtin,
            skills,
            folders,
        }
    }
}

/// Where the first of [`RUNNERS`] sees each skill's folder: at its mount
/// ([`mount_path`]), or, for a skill in the workspace, at its path there
/// (the workspace is mounted at its host path).
fn folders(skills: &Skills, grants: &Grants) -> HashMap<String, String> {
    let runner = grants.for_tool(RUNNERS[0]).ok();
    let workspace = grants.workspace().map(|w| w.host.clone());
    skills
        .skills
        .iter()
        .filter_map(|skill| {
            let mounted = mount_path(&skill.name);
            let is_mounted = runner
                .as_ref()
                .is_some_and(|g| g.mounts.iter().any(|(m, _)| m.guest == mounted));
            if is_mounted {
                return Some((skill.name.clone(), mounted));
            }
            let dir = skill.dir.canonicalize().ok()?;
            let inside = dir.starts_with(workspace.as_ref()?);
            inside.then(|| Some((skill.name.clone(), dir.to_str()?.to_string())))?
        })
        .collect()
}

/// The tools a skill's folder is mounted into, read-only: `bash`, which
/// runs its scripts, with its builtins or the programs granted to it.
pub const RUNNERS: [&str; 1] = [airlock_core::programs::SHELL];

/// Where [`RUNNERS`] see the folder of the skill named `skill`.
pub fn mount_path(skill: &str) -> String {
    format!("/skills/{skill}")
}

/// The `skill://` URI of `path` in the skill named `skill`.
pub fn skill_uri(skill: &str, path: &str) -> String {
    format!("skill://{skill}/{path}")
}

#[async_trait]
impl Tool for SkillTool {
    fn descriptor(&self) -> &Descriptor {
        &self.descriptor
    }

    fn origin(&self) -> &ToolOrigin {
        &self.origin
    }

    async fn call(&self, _: &mut Invocation, input: &Value) -> Result<ToolOutput, CallError> {
        let name = input["skill"].as_str().unwrap_or_default();
        let Some(skill) = self.skills.get(name) else {
            return Err(CallError::invalid_input(format!(
                "there is no skill {name:?}; the skills are: {}",
                self.skills
                    .skills
                    .iter()
                    .map(|s| s.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        };
        let mut text = format!(
            "# Skill: {}\n\n{}\n",
            skill.name,
            skill.instructions.trim_end()
        );
        if let Some(folder) = self.folders.get(&skill.name) {
            text.push_str(&format!(
                "\nIn `bash` calls the skill's folder is {folder} (read-only): run its \
                 scripts from there.\n"
            ));
        }
        let others: Vec<String> = skill
            .files
            .iter()
            .skip(1)
            .map(|f| {
                format!(
                    "- {} ({} bytes)",
                    skill_uri(&skill.name, &f.path),
                    f.bytes.len()
                )
            })
            .collect();
        if !others.is_empty() {
            text.push_str(&format!(
                "\nThe skill's files (paths relative to its folder):\n{}\n",
                others.join("\n")
            ));
        }
        Ok(ToolOutput::text(text))
    }
}
