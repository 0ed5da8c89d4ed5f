//! Runs one program confined, from the command line: for trying the
//! native tier by hand and for timing it (`scripts/native_spawn.sh`).
//!
//! ```text
//! confine [--plain | --ahead] [--repeat N [--gap MS]] [--read PATH]... [--write PATH]... [--read-only] -- PROGRAM [ARGS]...
//! ```
//!
//! The working directory is the current one (grant it); `PROGRAM` is an
//! absolute path (found on `PATH` only with `--plain`). `--plain` starts it unconfined, as the baseline a host pays
//! anyway. `--repeat N` starts it N times from this one process, as a host
//! does (after one start that is not counted), its output discarded, and
//! prints the median, 10th and 90th percentile of a start to its end;
//! `--gap MS` pauses before each start, as an agent's calls come apart.
//! `--ahead` (with `--repeat`) starts each in a helper started ahead of it
//! (`Helper::start`), the next one started after each run, untimed, as a
//! host does (`Helper::refill`).
//! Exits with the program's status, or 125 when it was refused.

use airlock_native::{Confinement, Helper};
use std::path::PathBuf;
use std::process::{Command, ExitCode, ExitStatus, Stdio};
use std::time::{Duration, Instant};

fn main() -> ExitCode {
    airlock_native::serve_if_asked();
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let mut confinement = Confinement::new(&cwd);
    let (mut plain, mut ahead, mut read_only, mut repeat, mut gap) =
        (false, false, false, 0usize, 0u64);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--plain" => plain = true,
            "--ahead" => ahead = true,
            "--gap" => gap = args.next().and_then(|n| n.parse().ok()).unwrap_or(0),
            "--read-only" => read_only = true,
            "--repeat" => repeat = args.next().and_then(|n| n.parse().ok()).unwrap_or(0),
            "--read" => {
                confinement.read(args.next().unwrap_or_default());
            }
            "--write" => {
                confinement.write(args.next().unwrap_or_default());
            }
            "--" => break,
            other => {
                eprintln!("confine: unknown argument {other:?}");
                return ExitCode::from(2);
            }
        }
    }
    let Some(program) = args.next() else {
        eprintln!("confine: give a program after `--`");
        return ExitCode::from(2);
    };
    let rest: Vec<String> = args.collect();
    if read_only {
        confinement = confinement.read_only();
    }
    let helper = Helper::at(None);
    let start = || {
        let program = PathBuf::from(&program);
        if plain {
            let mut command = Command::new(&program);
            command.args(&rest);
            return Ok((command, None));
        }
        let (command, dir) =
            helper
                .as_ref()
                .map_err(Clone::clone)?
                .command(&confinement, &program, &rest)?;
        Ok((command, Some(dir)))
    };
    if repeat > 0 && ahead {
        let Ok(helper) = helper else {
            eprintln!("confine: no helper");
            return ExitCode::from(125);
        };
        let program = PathBuf::from(&program);
        let run = || {
            let (child, _dir) = helper
                .start(&confinement, &program, &rest)
                .map_err(|e| e.to_string())?;
            Ok(child.wait_with_output().map_err(|e| e.to_string())?.status)
        };
        return timed(repeat, gap, run, || helper.refill());
    }
    if repeat > 0 {
        let run = || {
            start()
                .map_err(|e: airlock_native::Refused| e.to_string())
                .and_then(|(mut command, _dir)| {
                    let run = command
                        .stdin(Stdio::null())
                        .stdout(Stdio::null())
                        .stderr(Stdio::null());
                    run.status().map_err(|e| e.to_string())
                })
        };
        return timed(repeat, gap, run, || ());
    }
    let started = start().map(|(mut command, dir)| (command.status(), dir));
    match started {
        Ok((Ok(status), _dir)) => ExitCode::from(status.code().unwrap_or(128) as u8),
        Ok((Err(e), _)) => {
            eprintln!("confine: cannot start the program: {e}");
            ExitCode::from(125)
        }
        Err(refused) => {
            eprintln!("confine: {refused}");
            ExitCode::from(125)
        }
    }
}

/// Runs the program `1 + repeat` times (`gap` ms before each) and prints
/// the times of all but the first: `run` until it has the program's
/// status; `after` each, untimed.
fn timed(
    repeat: usize,
    gap: u64,
    run: impl Fn() -> Result<ExitStatus, String>,
    after: impl Fn(),
) -> ExitCode {
    let mut times = Vec::with_capacity(repeat);
    for i in 0..=repeat {
        std::thread::sleep(Duration::from_millis(gap));
        let began = Instant::now();
        let status = run();
        let took = began.elapsed();
        after();
        match status {
            Ok(status) if status.success() => {}
            Ok(status) => {
                eprintln!("confine: the program failed ({status})");
                return ExitCode::from(1);
            }
            Err(e) => {
                eprintln!("confine: {e}");
                return ExitCode::from(125);
            }
        }
        if i > 0 {
            times.push(took.as_secs_f64() * 1000.0);
        }
    }
    times.sort_by(f64::total_cmp);
    let at = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
    println!(
        "median {:.2} ms  p10 {:.2} ms  p90 {:.2} ms  ({repeat} starts)",
        at(0.5),
        at(0.1),
        at(0.9)
    );
    ExitCode::SUCCESS
}
