//! The tool itself: input, description, classification and the call (a
//! module of its own so a test guest can wrap it).

use crate::programs::{self, Program};
use crate::{classify, fs};
use airlock_sdk::{
    Access, Context, Describe, Flags, JsonSchema, Output, Preflight, Tool, ToolError, serde_json,
};
use bashkit::{
    Bash, Builtin, BuiltinContext, CommandResolver, ExecResult, ExecutionLimits, LimitExceeded,
    PosixFs, async_trait,
};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The default time limit of one command, as Claude Code's Bash.
const DEFAULT_TIMEOUT_MS: u64 = 120_000;
/// The most a command may ask for.
const MAX_TIMEOUT_MS: u64 = 600_000;
/// Output kept, in characters, as Claude Code's Bash.
const MAX_OUTPUT_CHARS: usize = 30_000;
/// Commands that reach the network: not built in (the host grants the
/// shell no socket, and bashkit's HTTP client is not built in); a granted
/// program of the name runs instead, through the host's proxy.
const NETWORK_COMMANDS: &[&str] = &["curl", "wget", "http"];

/// The state key of the variables earlier calls exported (a JSON object).
const EXPORTS: &str = "exports";

/// Input of `bash`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BashInput {
    /// The command line to run.
    command: String,
    /// Its time limit in milliseconds (default 120000, at most 600000).
    #[schemars(range(min = 1, max = 600000))]
    timeout: Option<u64>,
    /// What the command does, in 5 to 10 words.
    #[expect(
        dead_code,
        reason = "for the person approving the call; the call does not need it"
    )]
    description: Option<String>,
}

/// Output of `bash`.
#[derive(Serialize, JsonSchema)]
struct BashOutput {
    /// stdout and stderr, interleaved as the shell wrote them, capped.
    output: String,
    /// The exit code of the last command.
    exit_code: i32,
    /// Whether output was cut.
    truncated: bool,
}

/// The builtin a name that is neither a builtin nor a granted program
/// resolves to: it says what this shell is, instead of bash's bare
/// "command not found".
struct NotABuiltin {
    name: String,
    granted: Arc<[String]>,
}

#[async_trait]
impl Builtin for NotABuiltin {
    async fn execute(&self, _ctx: BuiltinContext<'_>) -> bashkit::Result<ExecResult> {
        let programs = if self.granted.is_empty() {
            "no programs from the machine".to_string()
        } else {
            format!(
                "of the machine's programs, only {}",
                self.granted.join(", ")
            )
        };
        Ok(ExecResult::err(
            format!(
                "bash: {}: command not found: Airlock's bash runs its builtins and {programs}, \
                 as the operator granted; `help` lists the builtins\n",
                self.name
            ),
            127,
        ))
    }
}

/// Finds a granted program for a name that is no builtin, else says there
/// is none.
struct Resolver {
    granted: Arc<[String]>,
    deadline: Instant,
}

impl CommandResolver for Resolver {
    fn resolve(&self, name: &str) -> Option<Arc<dyn Builtin>> {
        let name = name.to_string();
        if self.granted.contains(&name) {
            let deadline = self.deadline;
            return Some(Arc::new(Program { name, deadline }));
        }
        Some(Arc::new(NotABuiltin {
            name,
            granted: self.granted.clone(),
        }))
    }
}

/// The `bash` tool.
pub struct BashTool;

impl Tool for BashTool {
    type Input = BashInput;
    const PREFLIGHT: Preflight = Preflight::CLASSIFY;

    fn describe() -> Describe {
        Describe::new("bash", "Runs a bash command line in the sandbox.")
            .title("Bash")
            .alias("Bash")
            .prompt(
                "Runs a bash command line in the working directory, inside Airlock's sandbox.\n\
                 - The shell and its commands are built in (bash syntax; ls, cat, grep, rg, \
                 sed, awk, find, jq, sort, uniq, wc, head, tail, cut, tr, diff, xargs, tee, \
                 base64, sha256sum and more; `help` lists them). Programs from the machine \
                 (git, python3, cargo, ...) run only when the operator granted them, as listed \
                 at the end; each runs confined to the same directories, with no network unless \
                 hosts are listed there.\n\
                 - Only the workspace and the directories granted to this tool exist; other \
                 paths are refused, or do not exist for commands that only look.\n\
                 - stdout and stderr come back together, capped at 30000 characters, and a \
                 non-zero exit code on a last line `[exit code N]`. Exit code 1 from grep or \
                 rg (nothing found), diff or cmp (files differ) and test or [ (false) is an \
                 answer; any other non-zero exit is a failure, and cancels the calls running \
                 beside it.\n\
                 - `cd` and `export` at the top level carry over to later calls.\n\
                 - A line that only reads (ls, cat, grep, find without -delete or -exec, \
                 wc, head, jq, git status, git diff, git log, ... joined by pipes, && or ;, \
                 with no redirection to a file) runs beside other calls, with read-only \
                 access; anything else runs alone.\n\
                 - `timeout` is in milliseconds (default 120000, at most 600000); the \
                 operator's limit may be lower.\n\
                 - Where it differs from GNU bash and coreutils: ls -a does not list . and \
                 .., ls -p is not supported, ls and wc stop at the first name that does \
                 not exist, and no symbolic links can be made.",
            )
            .flags(Flags::CANCELS_SIBLINGS_ON_ERROR)
            .workspace(Access::ReadWrite)
            .output_schema::<BashOutput>()
    }

    fn classify(input: &BashInput) -> Option<Flags> {
        classify::is_read_only(&input.command).then_some(
            Flags::READ_ONLY
                | Flags::CONCURRENCY_SAFE
                | Flags::SEARCH_OR_READ
                | Flags::CANCELS_SIBLINGS_ON_ERROR,
        )
    }

    fn call(input: BashInput, cx: &Context) -> Result<Output, ToolError> {
        let timeout = Duration::from_millis(
            input
                .timeout
                .unwrap_or(DEFAULT_TIMEOUT_MS)
                .min(MAX_TIMEOUT_MS),
        );
        // What the host granted, and what earlier calls exported.
        let granted: HashMap<String, String> = std::env::vars().collect();
        let exported: BTreeMap<String, String> = cx
            .state(EXPORTS)
            .and_then(|json| serde_json::from_str(json).ok())
            .unwrap_or_default();
        let mut env = granted.clone();
        env.extend(exported.clone());
        let deadline = Instant::now() + timeout;
        // A granted program named like a builtin (`grep`, `find`) is the
        // one that runs: the operator granted the machine's.
        let granted_programs: Arc<[String]> = programs::granted().into();
        let shadowing = granted_programs.clone();
        let mut builder = Bash::builder()
            .fs(Arc::new(PosixFs::new(fs::WasiFs::new(cx))))
            .rootfs(false)
            .cwd(cx.cwd())
            .limits(
                ExecutionLimits::cli()
                    .timeout(timeout)
                    .max_stdout_bytes(4 * MAX_OUTPUT_CHARS)
                    .max_stderr_bytes(4 * MAX_OUTPUT_CHARS),
            )
            .builtin_filter(move |name| {
                !NETWORK_COMMANDS.contains(&name) && !shadowing.iter().any(|p| p == name)
            })
            .command_resolver(Arc::new(Resolver {
                granted: granted_programs,
                deadline,
            }));
        for (name, value) in &env {
            builder = builder.env(name, value);
        }
        let mut bash = builder.build();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .map_err(|e| ToolError::Failed(format!("cannot start the shell's runtime: {e}")))?;
        // stderr joins stdout in the order the shell writes them.
        let script = format!("exec 2>&1; {}", input.command);
        let result = runtime.block_on(bash.exec(&script));
        let result = match result {
            Ok(result) => result,
            Err(e @ bashkit::Error::Parse { .. }) => {
                return Err(ToolError::InvalidInput(format!("bash: {e}")));
            }
            Err(bashkit::Error::ResourceLimit(LimitExceeded::Timeout(_))) => {
                return Err(ToolError::Timeout(format!(
                    "bash stopped the command at its time limit of {} ms",
                    timeout.as_millis()
                )));
            }
            Err(e) => return Err(ToolError::Failed(format!("bash stopped the command: {e}"))),
        };
        // A program the host stopped at the deadline ends the line as the
        // shell's own limit does.
        if Instant::now() >= deadline {
            return Err(ToolError::Timeout(format!(
                "bash stopped the command at its time limit of {} ms",
                timeout.as_millis()
            )));
        }
        let state = bash.shell_state_view();
        let mut text = result.stdout.text_lossy().into_owned();
        text.push_str(&result.stderr.text_lossy());
        let total = text.chars().count();
        let truncated = total > MAX_OUTPUT_CHARS || result.stdout_truncated;
        if total > MAX_OUTPUT_CHARS {
            text = text.chars().take(MAX_OUTPUT_CHARS).collect();
            text.push_str(&format!(
                "\n[... {} more characters of output not shown]",
                total - MAX_OUTPUT_CHARS
            ));
        }
        let mut shown = text.clone();
        if result.exit_code != 0 {
            // On a line of its own, after the output exactly as written.
            if !shown.is_empty() {
                shown.push('\n');
            }
            shown.push_str(&format!("[exit code {}]", result.exit_code));
        }
        if !classify::exit_is_an_answer(&input.command, result.exit_code) {
            // A failing command cancels its siblings: the call fails, with
            // the output and the exit code.
            return Err(ToolError::Failed(shown));
        }
        let mut output = Output::text(shown).structured(&BashOutput {
            output: text,
            exit_code: result.exit_code,
            truncated,
        });
        let cwd = state.cwd.display().to_string();
        if cwd != cx.cwd() {
            output = output.set_cwd(cwd);
        }
        // `export` and `unset` at the top level: context changes, and this
        // tool's own record, since the host hands a tool only the
        // environment variables it was granted.
        let now: BTreeMap<String, String> = state
            .env
            .iter()
            .filter(|(name, _)| !matches!(name.as_str(), "PWD" | "OLDPWD" | "SHLVL"))
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect();
        for (name, value) in &now {
            if env.get(name) != Some(value) {
                output = output.set_env(name.clone(), value.clone());
            }
        }
        for name in env.keys() {
            if !now.contains_key(name) {
                output = output.unset_env(name.clone());
            }
        }
        let exports: BTreeMap<&String, &String> = now
            .iter()
            .filter(|(name, value)| granted.get(*name) != Some(*value))
            .collect();
        if exports.len() != exported.len()
            || exports.iter().any(|(n, v)| exported.get(*n) != Some(*v))
        {
            let json = serde_json::to_string(&exports).expect("strings serialize");
            output = output.set_state(EXPORTS, json);
        }
        Ok(output)
    }
}
