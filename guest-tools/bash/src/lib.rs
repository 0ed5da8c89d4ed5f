//! `bash`: a shell inside the sandbox (Claude Code's Bash tool), on
//! bashkit's interpreter: bash syntax and its builtins (grep, sed, awk,
//! find, jq, sort, …) implemented in Rust, run over the call's own WASI
//! handles (`fs.rs`). There are no native processes: a command that is not
//! a builtin fails, saying so. A line made only of reading commands is
//! read-only and concurrency-safe (`classify.rs`); anything else runs
//! alone. A failing command cancels its sibling calls; `cd` and `export`
//! at the top level become context changes for the next call.

mod classify;
mod fs;
mod tool;

airlock_sdk::export_tool!(tool::BashTool);
