//! Compile progress on a terminal: a spinner for each component being
//! compiled (the [`COMPILE_LOG`] events), replaced by a line once it is;
//! every other log line is printed above the spinners. Off a terminal the events
//! are log lines like any other.

use airlock_host::{COMPILE_LOG, CompileEvent};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use std::collections::HashMap;
use std::io::{self, Write};
use std::sync::Mutex;
use std::time::Duration;
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::{Context, Layer};

/// The spinners of the compiles in progress.
pub(crate) struct CompileBars {
    bars: MultiProgress,
    live: Mutex<HashMap<String, ProgressBar>>,
}

impl CompileBars {
    /// Spinners drawn by `bars` (on stderr).
    pub(crate) fn new(bars: MultiProgress) -> CompileBars {
        CompileBars {
            bars,
            live: Mutex::default(),
        }
    }
}

impl<S: Subscriber> Layer<S> for CompileBars {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        if event.metadata().target() != COMPILE_LOG {
            return;
        }
        let mut message = Message(String::new());
        event.record(&mut message);
        let mut live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        match CompileEvent::parse(&message.0) {
            Some(CompileEvent::Started { what, kib }) => {
                let message = format!("compiling {what} for this machine ({kib} KiB)");
                self.spin(&mut live, what, message);
            }
            Some(CompileEvent::Waiting { what }) => {
                let message = format!("waiting for another Airlock compiling {what}");
                self.spin(&mut live, what, message);
            }
            // The spinner goes, and a line is left above the others: once
            // none spins, the cursor is on a line of its own.
            Some(CompileEvent::Finished { what, secs }) => {
                self.done(&mut live, what, format!("  compiled {what} in {secs} s"));
            }
            Some(CompileEvent::Waited { what, secs }) => {
                let line = format!("  {what} compiled by another Airlock (waited {secs} s)");
                self.done(&mut live, what, line);
            }
            None => {}
        }
    }
}

impl CompileBars {
    /// A spinner saying `message` for `what`, in place of any it had.
    fn spin(&self, live: &mut HashMap<String, ProgressBar>, what: &str, message: String) {
        let bar = self.bars.add(ProgressBar::new_spinner());
        if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} {elapsed}") {
            bar.set_style(style);
        }
        bar.set_message(message);
        bar.enable_steady_tick(Duration::from_millis(100));
        if let Some(old) = live.insert(what.to_string(), bar) {
            old.finish_and_clear();
        }
    }

    /// `what`'s spinner replaced by `line`.
    fn done(&self, live: &mut HashMap<String, ProgressBar>, what: &str, line: String) {
        if let Some(bar) = live.remove(what) {
            bar.finish_and_clear();
        }
        let _ = self.bars.println(line);
    }
}

/// An event's message.
struct Message(String);

impl Visit for Message {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.0 = value.to_string();
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}

/// Stderr, written above the spinners.
#[derive(Clone)]
pub(crate) struct AboveBars(pub(crate) MultiProgress);

impl Write for AboveBars {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.suspend(|| io::stderr().write(buf))
    }

    fn flush(&mut self) -> io::Result<()> {
        io::stderr().flush()
    }
}

impl<'a> MakeWriter<'a> for AboveBars {
    type Writer = AboveBars;

    fn make_writer(&'a self) -> AboveBars {
        self.clone()
    }
}
