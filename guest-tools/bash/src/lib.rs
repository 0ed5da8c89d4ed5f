//! `bash`: a shell inside the sandbox (Claude Code's Bash tool), on
//! bashkit's interpreter: bash syntax and its builtins (grep, sed, awk,
//! find, jq, sort, …) implemented in Rust, run over the call's own WASI
//! handles (`fs.rs`). Native programs run only when the operator granted
//! them (`programs.rs`: the host runs each confined by the call's grants);
//! any other command that is not a builtin fails, saying so. A line made
//! only of reading commands (builtins, and the reading forms of common
//! programs: `git status`, `git log`, ...) is read-only and
//! concurrency-safe (`classify.rs`); anything else runs alone. A failing command cancels its sibling calls; `cd` and `export`
//! at the top level become context changes for the next call.

mod classify;
mod fs;
mod programs;
mod tool;

airlock_sdk::export_tool!(tool::BashTool);
