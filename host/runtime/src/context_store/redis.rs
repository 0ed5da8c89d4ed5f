//! [`Redis`]: contexts in a Redis (or Valkey) server, shared by replicas.
//!
//! A context is a hash at `airlock:context:ID` with a `PEXPIRE` of the
//! lifetime. Loading, creating and updating are each one Lua script (one
//! round trip, atomic on the server): an update applies to a context that
//! exists or to nothing. The client speaks RESP2 over a small pool of
//! connections; each command has a deadline, and a connection that failed
//! is dropped (its command is sent again, once, on a new one). Within the
//! deadline, a refused connection and a server still loading its data are
//! tried again (a restart).

use super::{ContextStore, Fields, StoreError};
use airlock_core::config::ContextStoreUrl;
use async_trait::async_trait;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// The most time one command (connecting included) may take.
const DEADLINE: Duration = Duration::from_secs(2);
/// Idle connections kept.
const POOL: usize = 16;
/// How soon a command a loading server refused is sent again, and a
/// refused connection tried again.
const AGAIN: Duration = Duration::from_millis(50);
/// The largest reply accepted (a bulk string or an array's length).
const MAX_REPLY: usize = 64 << 20;

/// `KEYS[1]`: the context. `ARGV[1]`: the lifetime in ms. Returns the
/// fields (an empty array for no context) and renews the lifetime.
const LOAD: &str = "local v = redis.call('HGETALL', KEYS[1]) \
    if #v > 0 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end \
    return v";

/// `ARGV[1]`: the lifetime in ms, then field, value pairs. A context
/// always holds at least its `created` field, so an existing one is never
/// empty.
const CREATE: &str = "redis.call('DEL', KEYS[1]) \
    redis.call('HSET', KEYS[1], 'created', ARGV[2]) \
    for i = 3, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end \
    redis.call('PEXPIRE', KEYS[1], ARGV[1]) \
    return 1";

/// `ARGV[1]`: the lifetime in ms, `ARGV[2]`: the `created` time of a
/// context to create when it does not exist (empty: write nothing then, and
/// return 0), `ARGV[3]`: how many pairs to set, then the pairs, then the
/// fields to remove.
const WRITE: &str = "if redis.call('EXISTS', KEYS[1]) == 0 then \
    if ARGV[2] == '' then return 0 end \
    redis.call('HSET', KEYS[1], 'created', ARGV[2]) end \
    local n = tonumber(ARGV[3]) \
    for i = 4, 3 + 2 * n, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end \
    for i = 4 + 2 * n, #ARGV do redis.call('HDEL', KEYS[1], ARGV[i]) end \
    redis.call('PEXPIRE', KEYS[1], ARGV[1]) \
    return 1";

/// The field every stored context holds besides its own.
const CREATED: &str = "created";

/// Contexts in Redis.
pub struct Redis {
    url: ContextStoreUrl,
    password_file: Option<PathBuf>,
    idle: Mutex<Vec<Connection>>,
}

impl Redis {
    /// A store at `url` (a [`ContextStoreUrl::Redis`]); nothing is
    /// connected until the first command.
    pub fn new(url: ContextStoreUrl) -> Redis {
        Redis {
            url,
            password_file: None,
            idle: Mutex::default(),
        }
    }

    /// The password is read from `file` (its trailing newline dropped)
    /// each time a connection is opened, for a URL that names none.
    pub fn with_password_file(mut self, file: Option<PathBuf>) -> Redis {
        self.password_file = file;
        self
    }

    /// A new connection, with the password from the file if there is one.
    async fn open(&self, waiting: &Waiting) -> Result<Connection, StoreError> {
        let password = match &self.password_file {
            None => None,
            Some(file) => {
                let text = tokio::fs::read_to_string(file).await.map_err(|e| {
                    StoreError(format!(
                        "the password file {} cannot be read: {e}",
                        file.display()
                    ))
                })?;
                Some(text.trim_end_matches(['\n', '\r']).to_string())
            }
        };
        Connection::open(&self.url, password.as_deref(), waiting).await
    }

    /// Sends `PING`: whether the server answers.
    pub async fn ping(&self) -> Result<(), StoreError> {
        match self.command(&[b"PING"]).await? {
            Reply::Simple(s) if s == "PONG" => Ok(()),
            other => Err(StoreError(format!("PING answered {other:?}"))),
        }
    }

    async fn script(&self, script: &str, key: &str, args: &[&[u8]]) -> Result<Reply, StoreError> {
        let key = format!("airlock:context:{key}");
        let mut command: Vec<&[u8]> = vec![b"EVAL", script.as_bytes(), b"1", key.as_bytes()];
        command.extend_from_slice(args);
        self.command(&command).await
    }

    /// Sets `set` and removes `remove` in context `id` ([`WRITE`]); creates
    /// it at time `created` when it does not exist, unless `created` is
    /// empty (then `false`, and nothing written).
    async fn write(
        &self,
        id: &str,
        created: &str,
        set: &Fields,
        remove: &[String],
        ttl: Duration,
    ) -> Result<bool, StoreError> {
        let ttl = ms(ttl);
        let pairs = set.len().to_string();
        let mut args: Vec<&[u8]> = vec![&ttl, created.as_bytes(), pairs.as_bytes()];
        changes(&mut args, set, remove);
        match self.script(WRITE, id, &args).await? {
            Reply::Int(n) => Ok(n == 1),
            other => Err(StoreError(format!("the write answered {other:?}"))),
        }
    }

    /// Runs one command, within [`DEADLINE`]: an error reply is an error.
    /// A server restarting waits a moment before it listens, then answers
    /// every command "still loading" until it has read its data back: the
    /// connection is tried, and the command sent, again until it is
    /// answered, or the deadline passes.
    async fn command(&self, args: &[&[u8]]) -> Result<Reply, StoreError> {
        let waiting = Waiting::default();
        let answered = async {
            loop {
                match self.attempt(args, &waiting).await? {
                    Reply::Error(e) if e.starts_with("LOADING") => {
                        waiting.on("still loading its data".into());
                        tokio::time::sleep(AGAIN).await;
                    }
                    reply => return Ok::<_, StoreError>(reply),
                }
            }
        };
        let reply = tokio::time::timeout(DEADLINE, answered)
            .await
            .map_err(|_| {
                let what = waiting.reason().unwrap_or_else(|| "no answer".into());
                StoreError(format!("{}: {what} for {} s", self.url, DEADLINE.as_secs()))
            })??;
        match reply {
            Reply::Error(e) => Err(StoreError(format!("{} answered: {e}", self.url))),
            reply => Ok(reply),
        }
    }

    /// Sends one command on an idle connection (or a new one); a
    /// connection is kept only after a complete reply. A command whose
    /// connection fails (the server restarted, was killed with the command
    /// in flight, or closed idle clients) is sent again once on a new one,
    /// and the other idle ones are dropped: every command sent here is
    /// idempotent.
    async fn attempt(&self, args: &[&[u8]], waiting: &Waiting) -> Result<Reply, StoreError> {
        let mut again = true;
        loop {
            let idle = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
            let mut connection = match idle {
                Some(connection) => connection,
                None => self.open(waiting).await?,
            };
            match connection.send(args).await {
                Ok(reply) => {
                    let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
                    if idle.len() < POOL {
                        idle.push(connection);
                    }
                    return Ok(reply);
                }
                Err(e) if again => {
                    tracing::debug!(
                        "a connection to {} failed ({e}): sending again on a new one",
                        self.url
                    );
                    self.idle.lock().unwrap_or_else(|e| e.into_inner()).clear();
                    again = false;
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// Why a command is still waiting, if it was told: said when its
/// deadline passes.
#[derive(Default)]
struct Waiting(Mutex<Option<String>>);

impl Waiting {
    fn on(&self, reason: String) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(reason);
    }

    fn reason(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

fn ms(ttl: Duration) -> Vec<u8> {
    ttl.as_millis().max(1).to_string().into_bytes()
}

/// Now, in seconds since the epoch (a context's `created` field).
fn now() -> String {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
        .to_string()
}

/// `set`'s pairs, then `remove`.
fn changes<'a>(args: &mut Vec<&'a [u8]>, set: &'a Fields, remove: &'a [String]) {
    for (k, v) in set {
        args.push(k.as_bytes());
        args.push(v.as_bytes());
    }
    args.extend(remove.iter().map(|k| k.as_bytes()));
}

#[async_trait]
impl ContextStore for Redis {
    async fn load(&self, id: &str, ttl: Duration) -> Result<Option<Fields>, StoreError> {
        let ttl = ms(ttl);
        let Reply::Array(Some(items)) = self.script(LOAD, id, &[&ttl]).await? else {
            return Err(StoreError(
                "HGETALL answered something other than an array".into(),
            ));
        };
        if items.is_empty() {
            return Ok(None);
        }
        let mut fields = Fields::new();
        let mut items = items.into_iter();
        while let (Some(k), Some(v)) = (items.next(), items.next()) {
            let (Reply::Bulk(Some(k)), Reply::Bulk(Some(v))) = (k, v) else {
                return Err(StoreError(
                    "HGETALL answered a field that is not a string".into(),
                ));
            };
            let text = |b: Vec<u8>| {
                String::from_utf8(b)
                    .map_err(|_| StoreError("a stored context field is not UTF-8".into()))
            };
            fields.insert(text(k)?, text(v)?);
        }
        fields.remove(CREATED);
        Ok(Some(fields))
    }

    async fn check(&self) -> Result<(), StoreError> {
        self.ping().await
    }

    async fn create(&self, id: &str, fields: &Fields, ttl: Duration) -> Result<(), StoreError> {
        let ttl = ms(ttl);
        let now = now();
        let mut args: Vec<&[u8]> = vec![&ttl, now.as_bytes()];
        changes(&mut args, fields, &[]);
        self.script(CREATE, id, &args).await.map(drop)
    }

    async fn update(
        &self,
        id: &str,
        set: &Fields,
        remove: &[String],
        ttl: Duration,
    ) -> Result<bool, StoreError> {
        self.write(id, "", set, remove, ttl).await
    }

    async fn merge(
        &self,
        id: &str,
        set: &Fields,
        remove: &[String],
        ttl: Duration,
    ) -> Result<(), StoreError> {
        self.write(id, &now(), set, remove, ttl).await.map(drop)
    }

    async fn remove(&self, id: &str) -> Result<(), StoreError> {
        self.script("return redis.call('DEL', KEYS[1])", id, &[])
            .await
            .map(drop)
    }
}

/// A reply, as RESP2 has them.
#[derive(Debug, PartialEq, Eq)]
enum Reply {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<Reply>>),
}

struct Connection {
    stream: BufReader<TcpStream>,
}

impl Connection {
    /// A connection to `url`, signed in with its password or else with
    /// `password`.
    async fn open(
        url: &ContextStoreUrl,
        password: Option<&str>,
        waiting: &Waiting,
    ) -> Result<Connection, StoreError> {
        let ContextStoreUrl::Redis {
            host,
            port,
            db,
            username,
            password: in_url,
        } = url
        else {
            return Err(StoreError(format!("{url} is not a Redis URL")));
        };
        let password = in_url.as_deref().or(password);
        let stream = loop {
            match TcpStream::connect((host.as_str(), *port)).await {
                Ok(stream) => break stream,
                // Nothing listens: a server restarting does not for a
                // moment. Tried again until the command's deadline.
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                    waiting.on(format!("cannot connect ({e})"));
                    tokio::time::sleep(AGAIN).await;
                }
                Err(e) => return Err(StoreError(format!("cannot connect to {url}: {e}"))),
            }
        };
        // A command and its reply are small: without this, each waits for
        // the server's delayed ACK.
        let _ = stream.set_nodelay(true);
        let mut connection = Connection {
            stream: BufReader::new(stream),
        };
        if let Some(password) = password {
            let mut auth: Vec<&[u8]> = vec![b"AUTH"];
            if let Some(user) = username {
                auth.push(user.as_bytes());
            }
            auth.push(password.as_bytes());
            if let Reply::Error(e) = connection.send(&auth).await? {
                return Err(StoreError(format!("{url} refused the password: {e}")));
            }
        }
        if *db != 0 {
            let db = db.to_string();
            if let Reply::Error(e) = connection.send(&[b"SELECT", db.as_bytes()]).await? {
                return Err(StoreError(format!("{url}: SELECT {db} failed: {e}")));
            }
        }
        Ok(connection)
    }

    async fn send(&mut self, args: &[&[u8]]) -> Result<Reply, StoreError> {
        let mut out = Vec::with_capacity(64 + args.iter().map(|a| a.len() + 16).sum::<usize>());
        out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
        for arg in args {
            out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
            out.extend_from_slice(arg);
            out.extend_from_slice(b"\r\n");
        }
        let io = |e: std::io::Error| StoreError(format!("the connection to Redis failed: {e}"));
        self.stream.get_mut().write_all(&out).await.map_err(io)?;
        read_reply(&mut self.stream, 0).await
    }
}

/// Reads one reply; arrays nest at most a few levels.
fn read_reply(
    stream: &mut BufReader<TcpStream>,
    depth: usize,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Reply, StoreError>> + Send + '_>> {
    Box::pin(async move {
        let bad = |what: &str| StoreError(format!("Redis sent {what}"));
        if depth > 8 {
            return Err(bad("arrays nested too deep"));
        }
        let mut line = Vec::new();
        let read = (&mut *stream)
            .take(MAX_REPLY as u64)
            .read_until(b'\n', &mut line)
            .await
            .map_err(|e| StoreError(format!("the connection to Redis failed: {e}")))?;
        if read == 0 || !line.ends_with(b"\r\n") {
            return Err(bad("a truncated reply (the connection closed)"));
        }
        line.truncate(line.len() - 2);
        let (kind, rest) = line.split_first().ok_or_else(|| bad("an empty line"))?;
        let text = String::from_utf8_lossy(rest).into_owned();
        let length = || -> Result<Option<usize>, StoreError> {
            let n: i64 = text.parse().map_err(|_| bad("a bad length"))?;
            if n < 0 {
                return Ok(None);
            }
            let n = usize::try_from(n).map_err(|_| bad("a bad length"))?;
            if n > MAX_REPLY {
                return Err(bad("a reply larger than 64 MiB"));
            }
            Ok(Some(n))
        };
        Ok(match kind {
            b'+' => Reply::Simple(text),
            b'-' => Reply::Error(text),
            b':' => Reply::Int(text.parse().map_err(|_| bad("a bad integer"))?),
            b'$' => match length()? {
                None => Reply::Bulk(None),
                Some(n) => {
                    let mut data = vec![0; n + 2];
                    stream
                        .read_exact(&mut data)
                        .await
                        .map_err(|e| StoreError(format!("the connection to Redis failed: {e}")))?;
                    data.truncate(n);
                    Reply::Bulk(Some(data))
                }
            },
            b'*' => match length()? {
                None => Reply::Array(None),
                Some(n) => {
                    let mut items = Vec::with_capacity(n.min(1024));
                    for _ in 0..n {
                        items.push(read_reply(stream, depth + 1).await?);
                    }
                    Reply::Array(Some(items))
                }
            },
            _ => return Err(bad("a reply of an unknown kind")),
        })
    })
}
