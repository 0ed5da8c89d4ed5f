//! The `airlock` binary: see [`airlock_cli`].

fn main() -> std::process::ExitCode {
    airlock_cli::main()
}
