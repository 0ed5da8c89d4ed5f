//! Airlock's audit trail: one record per call and per decision that
//! changes what runs (approvals, installs, removals, reloads), written as
//! JSON lines, hash-chained ([`chain`]) and, every so many records or
//! seconds, checkpointed: the chain's head signed with the operator's
//! P-256 key. [`verify`] walks a trail offline and says where it was
//! tampered with.
//!
//! [`AuditLog::record`] only queues a record: a thread of its own numbers,
//! chains and writes them, so a call waits on a mutex, never on the disk.
//! The writer gathers what comes within 100 ms (or a batch of 512) into
//! one write and one `fdatasync`: syncing every 10 ms, the writer took
//! 6 % of a busy MCP server's CPU, most of it in `fdatasync` on a virtual
//! disk (BENCHMARKS.md, issue 53).
//! The queue is bounded. When the sink cannot be written (a full disk, a
//! collector's socket gone), [`OnFailure`] decides: `Fail` keeps every
//! record queued and refuses new calls ([`AuditLog::ready`]) until it can
//! write again; `Drop` lets calls go on, drops what does not fit, and
//! writes a `dropped` record with the count once the sink is back.
//!
//! A file trail is shared: a writer locks the file for each batch, and
//! when another process appended since, continues the chain from the last
//! line, so processes on one machine (a server, `airlock install`) and
//! restarts keep one chain. Past `max_file_bytes` the file is renamed
//! (`audit.jsonl.000000000123`, by its last `seq`) and the chain goes on
//! in a new file.
//!
//! Knows nothing of tools, MCP or wasmtime: the caller gives each record's
//! fields.

pub mod chain;
pub mod verify;

pub use chain::{PublicKey, SigningKey};
pub use verify::{Problem, Report, rotated_files, verify};

use serde_json::{Map, Value};
use std::collections::VecDeque;
use std::fmt::Write as _;
use std::io::{Read, Seek, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime};

/// Where records go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sink {
    /// A file, appended to (made 0600; a link is refused).
    File(PathBuf),
    /// The process's standard output (for a collector reading it).
    Stdout,
    /// A Unix socket a collector listens on (stream, one line a record).
    Unix(PathBuf),
}

/// A record [`AuditLog::try_record_json`] could not queue without
/// waiting: its fields, handed back.
#[derive(Debug)]
pub struct Full(pub String);

/// What happens when the sink cannot be written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnFailure {
    /// Keep every record and refuse calls until the sink is back.
    Fail,
    /// Go on; drop the records that do not fit, and say how many.
    Drop,
}

/// Somewhere else each written line also goes (an OpenTelemetry log
/// exporter): called by the writer with each line once the sink took it;
/// it must not block for long. Dropped when the log closes (which is when
/// an exporter flushes).
#[derive(Clone)]
pub struct Mirror(pub Arc<dyn Fn(&str) + Send + Sync>);

impl std::fmt::Debug for Mirror {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Mirror")
    }
}

/// How a log writes.
#[derive(Clone, Debug)]
pub struct Options {
    /// Where.
    pub sink: Sink,
    /// The key checkpoints are signed with (none: unsigned checkpoints,
    /// which `verify` reports).
    pub key: Option<SigningKey>,
    /// A checkpoint after this many records...
    pub checkpoint_every: u64,
    /// ...or this long after the first record since the last one.
    pub checkpoint_interval: Duration,
    /// When the sink is down.
    pub on_failure: OnFailure,
    /// This process's name in every record.
    pub replica: String,
    /// A file past this size is rotated.
    pub max_file_bytes: u64,
    /// The most records queued.
    pub queue: usize,
    /// Where each line also goes, if anywhere.
    pub mirror: Option<Mirror>,
}

impl Options {
    /// Options for `sink` with the defaults: a checkpoint every 1,000
    /// records or 60 s, failing closed, a 64 MiB file, 4,096 queued.
    pub fn new(sink: Sink, replica: impl Into<String>) -> Options {
        Options {
            sink,
            key: None,
            checkpoint_every: 1000,
            checkpoint_interval: Duration::from_secs(60),
            on_failure: OnFailure::Fail,
            replica: replica.into(),
            max_file_bytes: 64 << 20,
            queue: 4096,
            mirror: None,
        }
    }
}

/// How long a call waits for room in a full queue before it is refused
/// (with `OnFailure::Fail`).
const ROOM_WAIT: Duration = Duration::from_secs(2);
/// How often a writer tries a sink that is down.
const RETRY: Duration = Duration::from_millis(200);
/// The most records written in one batch.
const BATCH: usize = 512;
/// How long a record may wait to be written with others (one write and
/// one `fdatasync` for all of them); a queue of [`BATCH`] is written at
/// once. A crash loses what is queued: the last 100 ms or so, and more
/// while the sink is slow or down.
const FLUSH: Duration = Duration::from_millis(100);

/// An audit trail being written.
pub struct AuditLog {
    shared: Arc<Shared>,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl std::fmt::Debug for AuditLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditLog")
            .field("sink", &self.shared.options.sink)
            .finish_non_exhaustive()
    }
}

struct Shared {
    options: Options,
    queue: Mutex<Queue>,
    /// The writer waits on it for records.
    wake: Condvar,
    /// Callers wait on it for room.
    room: Condvar,
}

/// A record the writer writes: its kind, when, and where the text of its
/// other fields (a JSON object) lies in the batch's bodies.
struct Pending {
    time: SystemTime,
    kind: &'static str,
    body: std::ops::Range<usize>,
}

/// A record in the queue: its body is the next `len` bytes of
/// [`Queue::text`]. Callers copy their fields there and free their own
/// strings, and the writer copies them out: no allocation is freed on
/// another thread than the one that made it (glibc's allocator would
/// make the two wait on each other's arena).
struct Queued {
    time: SystemTime,
    kind: &'static str,
    len: usize,
}

#[derive(Default)]
struct Queue {
    pending: VecDeque<Queued>,
    /// The pending records' bodies, one after the other.
    text: String,
    /// When the oldest pending record came.
    oldest: Option<Instant>,
    dropped: u64,
    /// Why the sink cannot be written, while it cannot.
    down: Option<String>,
    closing: bool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl AuditLog {
    /// Opens the sink (so a trail that cannot be written fails here, at
    /// start) and starts the writer; the first record says who started.
    pub fn open(options: Options) -> Result<AuditLog, String> {
        let mut writer = Writer::open(&options)?;
        let shared = Arc::new(Shared {
            options,
            queue: Mutex::new(Queue::default()),
            wake: Condvar::new(),
            room: Condvar::new(),
        });
        let log = AuditLog {
            shared: shared.clone(),
            writer: Mutex::new(None),
        };
        log.record_json(
            "start",
            format!(
                "{{\"pid\":{},\"version\":\"{}\"}}",
                std::process::id(),
                env!("CARGO_PKG_VERSION")
            ),
        )?;
        let thread = std::thread::Builder::new()
            .name("airlock-audit".into())
            .spawn(move || writer.run(&shared))
            .map_err(|e| format!("cannot start the audit writer: {e}"))?;
        *log.writer.lock().unwrap_or_else(PoisonError::into_inner) = Some(thread);
        Ok(log)
    }

    /// Whether a call may run: with `OnFailure::Fail`, not while the sink
    /// cannot be written (the error says why).
    pub fn ready(&self) -> Result<(), String> {
        let queue = self.shared.lock();
        match (&queue.down, self.shared.options.on_failure) {
            (Some(why), OnFailure::Fail) => Err(format!(
                "the audit trail cannot be written ({why}), and audit.on_failure is \"fail\": \
                 calls are refused until it can be"
            )),
            _ => Ok(()),
        }
    }

    /// Queues a record of `kind` with `fields` (the writer adds `seq`,
    /// `replica`, `time`, `kind`, `prev` and `hash`, names `fields` must
    /// not use). With `OnFailure::Fail`, a full queue is waited on for a
    /// while, then refused.
    pub fn record(&self, kind: &'static str, fields: Map<String, Value>) -> Result<(), String> {
        self.record_json(kind, Value::Object(fields).to_string())
    }

    /// [`AuditLog::record`] with the fields already serialized: `fields`
    /// is the text of a JSON object.
    pub fn record_json(&self, kind: &'static str, fields: String) -> Result<(), String> {
        let Err(Full(fields)) = self.try_record_json(kind, fields) else {
            return Ok(());
        };
        let shared = &self.shared;
        let mut queue = shared.lock();
        let deadline = Instant::now() + ROOM_WAIT;
        while queue.pending.len() >= shared.options.queue {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(format!(
                    "the audit trail is {} records behind{}: the record is refused",
                    queue.pending.len(),
                    queue
                        .down
                        .as_ref()
                        .map(|why| format!(" ({why})"))
                        .unwrap_or_default()
                ));
            }
            queue = shared
                .room
                .wait_timeout(queue, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        self.enqueue(queue, kind, &fields);
        Ok(())
    }

    /// [`AuditLog::record_json`] that never waits: when the queue is full
    /// and the trail fails closed, the fields come back in [`Full`], for
    /// `record_json` to wait for room on a thread that may block (an
    /// async caller's `spawn_blocking`).
    pub fn try_record_json(&self, kind: &'static str, fields: String) -> Result<(), Full> {
        let shared = &self.shared;
        let mut queue = shared.lock();
        if queue.pending.len() >= shared.options.queue {
            if shared.options.on_failure == OnFailure::Fail {
                return Err(Full(fields));
            }
            queue.dropped += 1;
            return Ok(());
        }
        self.enqueue(queue, kind, &fields);
        Ok(())
    }

    fn enqueue(&self, mut queue: MutexGuard<'_, Queue>, kind: &'static str, fields: &str) {
        queue.pending.push_back(Queued {
            time: SystemTime::now(),
            kind,
            len: fields.len(),
        });
        queue.text.push_str(fields);
        // The writer is woken to set its timer for the first record, and
        // at once for a full batch; in between it is left alone.
        let wake = match queue.pending.len() {
            1 => {
                queue.oldest = Some(Instant::now());
                true
            }
            n => n == BATCH,
        };
        drop(queue);
        if wake {
            self.shared.wake.notify_one();
        }
    }

    /// Writes what is queued and a last checkpoint, and stops the writer.
    /// With the sink down, waits at most `ROOM_WAIT` for it.
    pub fn close(&self) {
        self.shared.lock().closing = true;
        self.shared.wake.notify_one();
        let thread = self
            .writer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(thread) = thread {
            let _ = thread.join();
        }
    }
}

impl Drop for AuditLog {
    fn drop(&mut self) {
        self.close();
    }
}

/// The writer's side: the sink and the chain.
struct Writer {
    out: Out,
    /// The hash of the last record written, and its `seq`.
    head: (String, u64),
    /// Records since the last checkpoint, and when the first of them came.
    since_checkpoint: (u64, Option<Instant>),
    /// The replica's name as a JSON string.
    replica: String,
    /// A batch's bodies and its lines: kept from batch to batch, so that
    /// a batch allocates nothing (a fresh buffer this size is mapped, and
    /// faulted in page by page, every time).
    bodies: String,
    lines: String,
    clock: Clock,
}

enum Out {
    File {
        path: PathBuf,
        file: Option<std::fs::File>,
        /// The file's length after this writer's last batch, and its inode.
        known: (u64, u64),
    },
    Stdout,
    Unix {
        path: PathBuf,
        stream: Option<std::os::unix::net::UnixStream>,
    },
}

impl Writer {
    fn open(options: &Options) -> Result<Writer, String> {
        let out = match &options.sink {
            Sink::File(path) => {
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir)
                        .map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
                }
                let file = open_file(path)?;
                Out::File {
                    path: path.clone(),
                    file: Some(file),
                    known: (u64::MAX, 0),
                }
            }
            Sink::Stdout => Out::Stdout,
            Sink::Unix(path) => Out::Unix {
                stream: Some(
                    std::os::unix::net::UnixStream::connect(path)
                        .map_err(|e| format!("cannot connect to {}: {e}", path.display()))?,
                ),
                path: path.clone(),
            },
        };
        Ok(Writer {
            out,
            head: (chain::GENESIS.to_string(), 0),
            since_checkpoint: (0, None),
            replica: Value::from(options.replica.as_str()).to_string(),
            bodies: String::new(),
            lines: String::new(),
            clock: Clock::default(),
        })
    }

    fn run(&mut self, shared: &Shared) {
        let options = &shared.options;
        loop {
            let mut bodies = std::mem::take(&mut self.bodies);
            bodies.clear();
            let (batch, dropped, closing) = {
                let mut queue = shared.lock();
                loop {
                    let due = self.checkpoint_due(options);
                    // A sink that is down is tried again (every `RETRY`:
                    // a failed write sleeps), so that calls are let through
                    // again, and the records dropped meanwhile are counted
                    // in the trail, as soon as it is back.
                    let retry = queue.down.is_some() || queue.dropped > 0;
                    let flush = queue
                        .oldest
                        .filter(|_| !queue.pending.is_empty())
                        .map(|oldest| FLUSH.saturating_sub(oldest.elapsed()));
                    let full = queue.pending.len() >= BATCH;
                    if flush.is_some_and(|left| left.is_zero())
                        || full
                        || queue.closing
                        || due
                        || retry
                    {
                        break;
                    }
                    let checkpoint = match self.since_checkpoint.1 {
                        Some(first) => options
                            .checkpoint_interval
                            .saturating_sub(first.elapsed())
                            .max(Duration::from_millis(1)),
                        None => Duration::from_secs(3600),
                    };
                    let wait = flush.map_or(checkpoint, |f| f.min(checkpoint));
                    queue = shared
                        .wake
                        .wait_timeout(queue, wait)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0;
                }
                let take = queue.pending.len().min(BATCH);
                let mut at = 0;
                let batch: Vec<Pending> = queue
                    .pending
                    .drain(..take)
                    .map(|q| {
                        at += q.len;
                        Pending {
                            time: q.time,
                            kind: q.kind,
                            body: at - q.len..at,
                        }
                    })
                    .collect();
                // The batch's text in one copy; what stays moves to the
                // front only when more than a batch was queued.
                bodies.push_str(&queue.text[..at]);
                queue.text.drain(..at);
                queue.oldest = (!queue.pending.is_empty()).then(Instant::now);
                (batch, std::mem::take(&mut queue.dropped), queue.closing)
            };
            let mut records = Vec::with_capacity(batch.len() + 1);
            if dropped > 0 {
                let start = bodies.len();
                let _ = write!(bodies, "{{\"count\":{dropped}}}");
                records.push(Pending {
                    time: SystemTime::now(),
                    kind: "dropped",
                    body: start..bodies.len(),
                });
            }
            let real = batch.len() as u64;
            records.extend(batch);
            let count = records.len() as u64;
            let checkpoint = self.checkpoint_due_after(options, count)
                || (closing && self.since_checkpoint.0 + count > 0);
            let written = self.write(options, &records, &bodies, checkpoint);
            self.bodies = bodies;
            match written {
                Ok(()) => {
                    let mut queue = shared.lock();
                    queue.down = None;
                    let empty = queue.pending.is_empty();
                    drop(queue);
                    shared.room.notify_all();
                    if closing && empty {
                        return;
                    }
                }
                Err(why) => {
                    let mut queue = shared.lock();
                    queue.down = Some(why);
                    match options.on_failure {
                        OnFailure::Fail => {
                            let kept: Vec<Pending> = records
                                .into_iter()
                                .filter(|r| r.kind != "dropped")
                                .collect();
                            let kept_text: String =
                                kept.iter().map(|r| &self.bodies[r.body.clone()]).collect();
                            queue.text.insert_str(0, &kept_text);
                            for record in kept.into_iter().rev() {
                                queue.pending.push_front(Queued {
                                    time: record.time,
                                    kind: record.kind,
                                    len: record.body.len(),
                                });
                            }
                            queue.oldest.get_or_insert_with(Instant::now);
                            queue.dropped += dropped;
                        }
                        OnFailure::Drop => queue.dropped += dropped + real,
                    }
                    if closing {
                        return;
                    }
                    drop(queue);
                    std::thread::sleep(RETRY);
                }
            }
        }
    }

    fn checkpoint_due(&self, options: &Options) -> bool {
        self.checkpoint_due_after(options, 0)
    }

    fn checkpoint_due_after(&self, options: &Options, more: u64) -> bool {
        let (count, first) = self.since_checkpoint;
        count + more >= options.checkpoint_every
            || first.is_some_and(|f| f.elapsed() >= options.checkpoint_interval)
    }

    /// Numbers, chains and writes `records`, with a checkpoint after them
    /// when `checkpoint`; all or nothing.
    fn write(
        &mut self,
        options: &Options,
        records: &[Pending],
        bodies: &str,
        checkpoint: bool,
    ) -> Result<(), String> {
        // Another writer may rotate the file between our open and our
        // lock: a lock taken on a file no longer at the path is let go,
        // and the path opened again.
        for _ in 0..16 {
            self.reconnect()?;
            let guard = match self.lock_file()? {
                Locked::Moved => continue,
                Locked::Held(guard) => Some(guard),
                Locked::NotAFile => None,
            };
            let result = self.write_locked(options, records, bodies, checkpoint);
            drop(guard);
            return result;
        }
        Err("the trail's file keeps being moved away".into())
    }

    fn write_locked(
        &mut self,
        options: &Options,
        records: &[Pending],
        bodies: &str,
        checkpoint: bool,
    ) -> Result<(), String> {
        let saved = (self.head.clone(), self.since_checkpoint);
        let mut text = std::mem::take(&mut self.lines);
        text.clear();
        for record in records {
            self.push(
                &mut text,
                record.time,
                record.kind,
                &bodies[record.body.clone()],
            );
        }
        if checkpoint && (self.since_checkpoint.0 > 0) {
            let (head, head_seq) = self.head.clone();
            let mut fields = Map::new();
            fields.insert("head".into(), head.clone().into());
            fields.insert("head_seq".into(), head_seq.into());
            if let Some(key) = &options.key {
                let message = chain::checkpoint_message(&head, head_seq);
                fields.insert("key".into(), key.public_key().fingerprint().into());
                fields.insert("signature".into(), key.sign(&message).into());
            }
            let body = Value::Object(fields).to_string();
            self.push(&mut text, SystemTime::now(), "checkpoint", &body);
            self.since_checkpoint = (0, None);
        }
        let emitted = self.emit(text.as_bytes(), options);
        match &emitted {
            Err(_) => (self.head, self.since_checkpoint) = saved,
            Ok(()) => {
                if let Some(mirror) = &options.mirror {
                    text.lines().for_each(|line| (mirror.0)(line));
                }
            }
        }
        self.lines = text;
        emitted
    }

    /// Appends the line for a record (`body` the text of its fields), the
    /// next in the chain, to `text`.
    fn push(&mut self, text: &mut String, time: SystemTime, kind: &str, body: &str) {
        let seq = self.head.1 + 1;
        let start = text.len();
        let _ = write!(
            text,
            "{{\"seq\":{seq},\"replica\":{},\"time\":\"",
            self.replica
        );
        self.clock.write(text, time);
        let _ = write!(text, "\",\"kind\":\"{kind}\",");
        let inner = body.trim();
        let inner = inner
            .strip_prefix('{')
            .and_then(|b| b.strip_suffix('}'))
            .unwrap_or("")
            .trim();
        if !inner.is_empty() {
            text.push_str(inner);
            text.push(',');
        }
        let _ = write!(text, "\"prev\":\"{}\"}}", self.head.0);
        let hash = chain::sha256(&text.as_bytes()[start..]);
        text.pop();
        let _ = writeln!(text, ",\"hash\":\"{hash}\"}}");
        let is_checkpoint = kind == "checkpoint";
        self.head = (hash, seq);
        if !is_checkpoint {
            self.since_checkpoint.0 += 1;
            self.since_checkpoint.1.get_or_insert_with(Instant::now);
        }
    }

    /// Opens again a sink that failed or moved (a rotated or removed file,
    /// a socket that closed).
    fn reconnect(&mut self) -> Result<(), String> {
        match &mut self.out {
            Out::File { path, file, known } => {
                let moved = match (file.as_ref(), std::fs::metadata(&*path)) {
                    (Some(f), Ok(now)) => f.metadata().map(|m| m.ino()).ok() != Some(now.ino()),
                    _ => true,
                };
                if moved {
                    *file = Some(open_file(path)?);
                    *known = (u64::MAX, 0);
                }
                Ok(())
            }
            Out::Unix { path, stream } if stream.is_none() => {
                *stream = Some(
                    std::os::unix::net::UnixStream::connect(&*path)
                        .map_err(|e| format!("cannot connect to {}: {e}", path.display()))?,
                );
                // The chain goes on from the last record written: a
                // collector that kept what it had received sees no gap.
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// For a file: its lock, held for one batch, and the chain's head as
    /// the file has it (another process may have written since); `Moved`
    /// when the file locked is no longer the one at the path (another
    /// writer rotated it meanwhile), and it is closed.
    fn lock_file(&mut self) -> Result<Locked, String> {
        let Out::File { path, file, known } = &mut self.out else {
            return Ok(Locked::NotAFile);
        };
        let f = file.as_mut().ok_or("the file is not open")?;
        f.lock()
            .map_err(|e| format!("cannot lock {}: {e}", path.display()))?;
        let guard = FileLock(f.try_clone().map_err(|e| e.to_string())?);
        let meta = f.metadata().map_err(|e| e.to_string())?;
        if std::fs::metadata(&*path).map(|m| m.ino()).ok() != Some(meta.ino()) {
            drop(guard);
            *file = None;
            return Ok(Locked::Moved);
        }
        if (meta.len(), meta.ino()) != *known {
            let from_here = last_head(f).map_err(|e| format!("{}: {e}", path.display()))?;
            let head = match from_here {
                Some(head) => Some(head),
                None => rotated_files(path)
                    .last()
                    .map(|older| {
                        std::fs::File::open(older)
                            .map_err(|e| e.to_string())
                            .and_then(|mut f| last_head(&mut f))
                    })
                    .transpose()
                    .map_err(|e| format!("{}: {e}", path.display()))?
                    .flatten(),
            };
            if let Some(head) = head {
                self.head = head;
            }
        }
        Ok(Locked::Held(guard))
    }

    fn emit(&mut self, bytes: &[u8], options: &Options) -> Result<(), String> {
        match &mut self.out {
            Out::File { path, file, known } => {
                let f = file.as_mut().ok_or("the file is not open")?;
                let written = f.write_all(bytes).and_then(|()| f.sync_data());
                if let Err(e) = written {
                    *file = None;
                    return Err(format!("cannot write {}: {e}", path.display()));
                }
                let meta = f.metadata().map_err(|e| e.to_string())?;
                *known = (meta.len(), meta.ino());
                if meta.len() >= options.max_file_bytes {
                    let rotated = PathBuf::from(format!("{}.{:012}", path.display(), self.head.1));
                    std::fs::rename(&*path, &rotated).map_err(|e| {
                        format!(
                            "cannot rotate {} to {}: {e}",
                            path.display(),
                            rotated.display()
                        )
                    })?;
                }
                Ok(())
            }
            Out::Stdout => {
                let mut out = std::io::stdout().lock();
                out.write_all(bytes)
                    .and_then(|()| out.flush())
                    .map_err(|e| format!("cannot write to standard output: {e}"))
            }
            Out::Unix { path, stream } => {
                let s = stream.as_mut().ok_or("not connected")?;
                if let Err(e) = s.write_all(bytes) {
                    *stream = None;
                    return Err(format!("cannot write to {}: {e}", path.display()));
                }
                Ok(())
            }
        }
    }
}

/// Times as records show them: the last second a time was written in, and
/// its text up to the fraction (`2026-12-07T15:07:20.`).
#[derive(Default)]
struct Clock(u64, String);

impl Clock {
    /// Appends `time` as RFC 3339 in UTC to the microsecond
    /// (`2026-12-07T15:07:20.123456Z`); the text up to the fraction is
    /// made once a second.
    fn write(&mut self, text: &mut String, time: SystemTime) {
        let Ok(since) = time.duration_since(SystemTime::UNIX_EPOCH) else {
            text.push_str(
                &chrono::DateTime::<chrono::Utc>::from(time)
                    .to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
            );
            return;
        };
        let second = since.as_secs();
        if self.0 != second || self.1.is_empty() {
            let whole = SystemTime::UNIX_EPOCH + Duration::from_secs(second);
            let full = chrono::DateTime::<chrono::Utc>::from(whole)
                .to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
            // `...:20.000000Z` without `000000Z`.
            let prefix = full.strip_suffix("000000Z").unwrap_or(&full).to_string();
            *self = Clock(second, prefix);
        }
        text.push_str(&self.1);
        let _ = write!(text, "{:06}Z", since.subsec_micros());
    }
}

/// A file's lock, released when dropped.
struct FileLock(std::fs::File);

/// What [`Writer::lock_file`] got.
enum Locked {
    /// The sink is not a file.
    NotAFile,
    /// The file at the path, locked.
    Held(FileLock),
    /// The file locked had been moved from the path.
    Moved,
}

impl Drop for FileLock {
    fn drop(&mut self) {
        let _ = self.0.unlock();
    }
}

/// Opens `path` to append, made 0600, refusing a link.
fn open_file(path: &Path) -> Result<std::fs::File, String> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .read(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| format!("cannot open {}: {e}", path.display()))
}

/// The hash and `seq` of the last whole record of `file`, if it has one.
fn last_head(file: &mut std::fs::File) -> Result<Option<(String, u64)>, String> {
    let len = file.metadata().map_err(|e| e.to_string())?.len();
    let from = len.saturating_sub(256 << 10);
    file.seek(std::io::SeekFrom::Start(from))
        .map_err(|e| e.to_string())?;
    let mut tail = Vec::new();
    file.take(len - from)
        .read_to_end(&mut tail)
        .map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&tail);
    let Some(line) = text.lines().rev().find(|l| l.ends_with('}')) else {
        return Ok(None);
    };
    let value: Value =
        serde_json::from_str(line).map_err(|e| format!("its last record does not read: {e}"))?;
    let hash = value.get("hash").and_then(Value::as_str);
    let seq = value.get("seq").and_then(Value::as_u64);
    match (hash, seq) {
        (Some(hash), Some(seq)) => Ok(Some((hash.to_string(), seq))),
        _ => Err("its last record has no hash or seq".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_written_as_chrono_writes_them_across_seconds() {
        let mut clock = Clock::default();
        let base = SystemTime::UNIX_EPOCH + Duration::from_secs(1_796_655_599);
        for offset_us in [
            0,
            1,
            999_999,
            1_000_000,
            1_000_001,
            86_400_000_123,
            59_999_999,
        ] {
            let time = base + Duration::from_micros(offset_us);
            let mut text = String::from("x");
            clock.write(&mut text, time);
            let expected = chrono::DateTime::<chrono::Utc>::from(time)
                .to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
            assert_eq!(text, format!("x{expected}"), "{offset_us} µs after");
        }
    }
}
