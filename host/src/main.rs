//! The `airlock` binary: see [`airlock_host::cli`].

fn main() -> std::process::ExitCode {
    airlock_host::cli::main()
}
