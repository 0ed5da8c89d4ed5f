//! The `airlock` binary: see [`airlock_cli`].

/// The binary allocates with mimalloc rather than the C library's
/// allocator: a call allocates and frees many small objects on Tokio's
/// workers, and glibc's allocator took a tenth of the CPU of a call
/// (BENCHMARKS.md has what mimalloc saves). Built without transparent huge
/// pages (`no_thp`), which added 18 MB to an idle server's resident
/// memory. The library crates leave the choice of allocator to whoever
/// embeds them.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    // Started as the sandbox helper of a native program (an MCP server),
    // the binary confines itself and runs it here, never returning.
    airlock_host::native::serve_if_asked();
    airlock_cli::main()
}
