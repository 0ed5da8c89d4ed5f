//! A hostile guest for the availability tests: the input's `attack` picks
//! what it does to the host. `ok` returns normally, so a test can check
//! the host still works after an attack.

use airlock_sdk::{Context, Describe, Flags, JsonSchema, Output, Tool, ToolError, export_tool};
use serde::Deserialize;

/// What to do.
#[derive(Deserialize, JsonSchema)]
struct HostileInput {
    /// `ok`, `loop`, `bulk`, `alloc`, `recurse`, `print`, `print_quietly`, `panic`, `block`,
    /// `random`, `log_bomb`, `big_output`, `deep_json`, `exit`, `progress_flood`,
    /// `stdin`, `remember`.
    attack: String,
    /// For `alloc`: how many MiB.
    mib: Option<usize>,
}

struct Hostile;

impl Tool for Hostile {
    type Input = HostileInput;

    fn describe() -> Describe {
        Describe::new("hostile", "Attacks the host on demand.")
            .flags(Flags::CONCURRENCY_SAFE | Flags::READ_ONLY)
    }

    fn call(input: HostileInput, _cx: &Context) -> Result<Output, ToolError> {
        match input.attack.as_str() {
            "ok" => Ok(Output::text("fine")),
            "loop" => {
                let mut x: u64 = 1;
                loop {
                    x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                }
            }
            "alloc" => {
                let mib = input.mib.unwrap_or(1024);
                let mut keep = Vec::new();
                for _ in 0..mib {
                    keep.push(std::hint::black_box(vec![1u8; 1 << 20]));
                }
                Ok(Output::text(format!("allocated {} MiB", keep.len())))
            }
            "recurse" => Ok(Output::text(format!(
                "{}",
                recurse(std::hint::black_box(1))
            ))),
            "print" => loop {
                println!("flooding the host's stdout with a line that goes on and on and on");
            },
            "print_quietly" => {
                use std::io::Write;
                let line = [b'x'; 4096];
                for _ in 0..4096 {
                    let _ = std::io::stdout().write(&line);
                    let _ = std::io::stderr().write(&line);
                }
                Ok(Output::text("wrote past the cap and ignored every error"))
            }
            "panic" => panic!("the hostile guest panicked on purpose"),
            "block" => {
                std::thread::sleep(std::time::Duration::from_secs(3600));
                Ok(Output::text("woke up"))
            }
            "bulk" => {
                let mut buf = vec![0u8; 32 << 20];
                let mut byte = 0u8;
                loop {
                    byte = byte.wrapping_add(1);
                    buf.fill(std::hint::black_box(byte));
                }
            }
            "random" => {
                let bytes = wasip2::random::random::get_random_bytes(1 << 30);
                Ok(Output::text(format!("got {} random bytes", bytes.len())))
            }
            "log_bomb" => {
                airlock_sdk::log(airlock_sdk::LogLevel::Info, &"x".repeat(128 << 20));
                Ok(Output::text("logged"))
            }
            "big_output" => Ok(Output::text("y".repeat(32 << 20))),
            "deep_json" => {
                let mut deep = airlock_sdk::serde_json::json!(0);
                for _ in 0..200 {
                    deep = airlock_sdk::serde_json::json!([deep]);
                }
                Ok(Output::text("deep").structured(&deep))
            }
            "exit" => std::process::exit(3),
            "stdin" => {
                let mut buf = String::new();
                let n = std::io::Read::read_to_string(&mut std::io::stdin(), &mut buf).unwrap_or(0);
                Ok(Output::text(format!("stdin gave {n} bytes")))
            }
            "remember" => {
                static CALLS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
                let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                Ok(Output::text(format!("call number {n} in this instance")))
            }
            "progress_flood" => {
                for i in 0..1_000_000u32 {
                    _cx.progress(&format!("step {i}"), None);
                }
                Ok(Output::text("flooded"))
            }
            other => Err(ToolError::InvalidInput(format!("unknown attack {other}"))),
        }
    }
}

#[allow(unconditional_recursion)]
fn recurse(n: u64) -> u64 {
    std::hint::black_box(recurse(std::hint::black_box(n + 1))) + 1
}

export_tool!(Hostile);
