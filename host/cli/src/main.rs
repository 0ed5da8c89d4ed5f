//! The `airlock` binary: see [`airlock_cli`].

/// The binary allocates with mimalloc rather than the C library's
/// allocator: a call allocates and frees many small objects, often on
/// different threads (a store made on one worker is dropped on another),
/// which glibc's allocator pays for in arena locks and consolidation.
/// BENCHMARKS.md has what it saves. Built without transparent huge pages
/// (`no_thp`), which cost 18 MB of resident memory at an idle start. The
/// library crates leave the choice of allocator to whoever embeds them.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    airlock_cli::main()
}
