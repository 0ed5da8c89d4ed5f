//! The native programs the operator granted this shell: commands the
//! resolver finds by name, each run by the host (`airlock:tool/programs`)
//! confined by the call's grants, with the shell's arguments, working
//! directory, exported variables and the pipeline's input.

use airlock_sdk::programs::{self as host, RunRequest};
use bashkit::{Builtin, BuiltinContext, ExecResult, async_trait};
use std::time::Instant;

/// The names of the programs granted to this call.
pub fn granted() -> Vec<String> {
    host::granted()
}

/// One granted program, as a command: `deadline` is when the command
/// line's time runs out, which the host holds the program to.
pub struct Program {
    pub name: String,
    pub deadline: Instant,
}

#[async_trait]
impl Builtin for Program {
    async fn execute(&self, ctx: BuiltinContext<'_>) -> bashkit::Result<ExecResult> {
        let request = RunRequest {
            name: self.name.clone(),
            args: ctx.args.to_vec(),
            cwd: ctx.cwd.display().to_string(),
            env: ctx
                .env
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            stdin: ctx.stdin.map(|s| s.as_bytes().to_vec()).unwrap_or_default(),
            timeout_ms: (self
                .deadline
                .saturating_duration_since(Instant::now())
                .as_millis())
            .try_into()
            .unwrap_or(u64::MAX),
        };
        Ok(match host::run(&request) {
            Ok(out) => {
                let mut result = ExecResult::ok_bytes(out.stdout);
                result.stderr = ExecResult::ok_bytes(out.stderr).stdout;
                result.exit_code = out.exit_code;
                result.stdout_truncated = out.truncated;
                result
            }
            // As a shell says a command it found cannot run.
            Err(e) => ExecResult::err(format!("bash: {e}\n"), 126),
        })
    }
}
