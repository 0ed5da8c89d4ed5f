//! The host side of a confined program's network: an HTTP proxy on a unix
//! socket ([`Proxy`]). The helper makes it the program's only way out: a
//! loopback port inside the program's network namespace, forwarded to the
//! socket, named in the program's proxy variables. Each request is
//! admitted or refused by the embedder's [`Policy`] before any connection
//! is made:
//! - `CONNECT host:port` (HTTPS, and any TCP a client tunnels), checked as
//!   the method `CONNECT`; the tunnel's bytes are never looked into;
//! - plain HTTP in absolute form (`GET http://host/path`), checked with its
//!   method, sent on as one request (`Connection: close`).
//!
//! A refusal is a `403` whose body gives the policy's reason, which
//! clients print. A program that ignores the proxy variables has no route
//! anywhere.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Admits a request (`method`, `host`, `port`), or says why not.
pub type Policy = dyn Fn(&str, &str, u16) -> Result<(), String> + Send + Sync;

/// The most a request's head may hold.
const HEAD_BYTES: usize = 32 << 10;
/// How long a client has to send its request's head, in all.
const HEAD_TIME: Duration = Duration::from_secs(30);
/// How long a connection to the host it asked for may take.
const CONNECT_TIME: Duration = Duration::from_secs(10);
/// How many connections one proxy serves at once; more are answered `503`.
const CONNECTIONS: usize = 64;

/// A running proxy. Dropped, it stops taking connections and closes those
/// it serves, tunnels included, so nothing it opened outlives it.
pub struct Proxy {
    dir: tempfile::TempDir,
    shared: Arc<Shared>,
}

/// What the proxy's threads share: the sockets each connection holds (to
/// be closed when the proxy goes).
#[derive(Default)]
struct Shared {
    stopped: AtomicBool,
    next: AtomicU64,
    open: Mutex<HashMap<u64, Vec<Socket>>>,
}

impl Shared {
    fn open(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Vec<Socket>>> {
        self.open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Keeps a handle on `socket`, connection `id`'s, for [`Proxy`]'s drop.
    fn hold(&self, id: u64, socket: Socket) {
        self.open().entry(id).or_default().push(socket);
    }
}

/// A handle on a connection's socket, to shut it down.
enum Socket {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Socket {
    fn shut(&self) {
        let _ = match self {
            Socket::Unix(s) => s.shutdown(Shutdown::Both),
            Socket::Tcp(s) => s.shutdown(Shutdown::Both),
        };
    }
}

impl Proxy {
    /// Starts a proxy admitting what `policy` admits, listening on a
    /// socket in a new private (0700) directory.
    ///
    /// ```
    /// use std::sync::Arc;
    /// let proxy = airlock_native::Proxy::start(Arc::new(|_method: &str, host: &str, _port| {
    ///     if host == "example.com" { Ok(()) } else { Err(format!("{host} is not granted")) }
    /// }))
    /// .unwrap();
    /// assert!(proxy.socket().exists());
    /// ```
    pub fn start(policy: Arc<Policy>) -> std::io::Result<Proxy> {
        let dir = tempfile::Builder::new().prefix("airlock-net-").tempdir()?;
        let listener = UnixListener::bind(dir.path().join("proxy.sock"))?;
        let shared = Arc::new(Shared::default());
        let accepting = shared.clone();
        std::thread::Builder::new()
            .name("airlock-proxy".into())
            .spawn(move || accept(&listener, &accepting, &policy))?;
        Ok(Proxy { dir, shared })
    }

    /// The socket it listens on.
    pub fn socket(&self) -> PathBuf {
        self.dir.path().join("proxy.sock")
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shared.stopped.store(true, Ordering::Release);
        for socket in self.shared.open().values().flatten() {
            socket.shut();
        }
        // Wakes the accepting thread, which sees it is stopped.
        let _ = UnixStream::connect(self.socket());
    }
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy")
            .field("socket", &self.socket())
            .finish()
    }
}

/// Takes connections until the proxy is dropped: each served in a thread
/// of its own, at most [`CONNECTIONS`] at once.
fn accept(listener: &UnixListener, shared: &Arc<Shared>, policy: &Arc<Policy>) {
    for client in listener.incoming() {
        if shared.stopped.load(Ordering::Acquire) {
            return;
        }
        let Ok(mut client) = client else {
            // Out of descriptors, say: wait rather than spin.
            std::thread::sleep(Duration::from_millis(50));
            continue;
        };
        let id = shared.next.fetch_add(1, Ordering::Relaxed);
        let busy = {
            let mut open = shared.open();
            let busy = open.len() >= CONNECTIONS;
            if !busy && let Ok(held) = client.try_clone() {
                open.insert(id, vec![Socket::Unix(held)]);
            }
            busy
        };
        if busy {
            let _ = client.set_write_timeout(Some(Duration::from_secs(1)));
            let why = format!("over {CONNECTIONS} connections at once");
            refuse(&mut client, 503, "Service Unavailable", &why);
            continue;
        }
        let (serving, policy) = (shared.clone(), policy.clone());
        let spawned = std::thread::Builder::new()
            .name("airlock-proxy-conn".into())
            .spawn(move || {
                serve(client, &*policy, id, &serving);
                serving.open().remove(&id);
            });
        if spawned.is_err() {
            shared.open().remove(&id);
        }
    }
}

/// One client connection: its request admitted and sent on, or refused.
fn serve(mut client: UnixStream, policy: &Policy, id: u64, shared: &Shared) {
    let (head, rest) = match read_head(&mut client) {
        Ok(read) => read,
        Err(why) => return refuse(&mut client, 400, "Bad Request", &why),
    };
    let request = match Request::parse(&head) {
        Ok(request) => request,
        Err(why) => return refuse(&mut client, 400, "Bad Request", &why),
    };
    if let Err(why) = policy(&request.method, &request.host, request.port) {
        return refuse(&mut client, 403, "Forbidden", &why);
    }
    let mut upstream = match connect(&request.host, request.port) {
        Ok(upstream) => upstream,
        Err(why) => return refuse(&mut client, 502, "Bad Gateway", &why),
    };
    if let Ok(held) = upstream.try_clone() {
        shared.hold(id, Socket::Tcp(held));
    }
    if shared.stopped.load(Ordering::Acquire) {
        return;
    }
    let _ = client.set_read_timeout(None);
    match &request.origin_form {
        None => {
            let opened = client.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n");
            if opened.is_ok() && upstream.write_all(&rest).is_ok() {
                splice(client, upstream);
            }
        }
        Some(head) if request.body => {
            if upstream.write_all(head.as_bytes()).is_ok() && upstream.write_all(&rest).is_ok() {
                splice(client, upstream);
            }
        }
        // A request without a body is all the client sends: only the
        // answer comes back, so nothing can follow the one head checked.
        // (No half-close towards the server: some take it for a client
        // gone and drop the answer.)
        Some(head) => {
            if upstream.write_all(head.as_bytes()).is_ok() {
                let _ = std::io::copy(&mut upstream, &mut client);
            }
        }
    }
}

/// Reads up to the end of a request's head, within [`HEAD_TIME`] in all;
/// returns the head and what came after it.
fn read_head(client: &mut UnixStream) -> Result<(String, Vec<u8>), String> {
    let deadline = Instant::now() + HEAD_TIME;
    let mut buffer = Vec::with_capacity(4096);
    let mut chunk = [0; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!("the request's head took over {HEAD_TIME:?}"));
        }
        let _ = client.set_read_timeout(Some(left));
        let n = client
            .read(&mut chunk)
            .map_err(|e| format!("reading the request: {e}"))?;
        if n == 0 {
            return Err("the request ended before its head".into());
        }
        // Only the new bytes (and the three before them) can end the head.
        let from = buffer.len().saturating_sub(3);
        buffer.extend_from_slice(&chunk[..n]);
        if let Some(end) = buffer[from..].windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buffer.split_off(from + end + 4);
            let head = String::from_utf8(buffer)
                .map_err(|_| "the request's head is not UTF-8".to_string())?;
            return Ok((head, rest));
        }
        if buffer.len() > HEAD_BYTES {
            return Err(format!("the request's head is over {HEAD_BYTES} bytes"));
        }
    }
}

/// A request as the proxy needs it.
#[derive(Debug, PartialEq, Eq)]
struct Request {
    method: String,
    host: String,
    port: u16,
    /// For plain HTTP, the head to send on (origin form, one request);
    /// `None` for a tunnel.
    origin_form: Option<String>,
    /// Whether the client may send more than the head (a body); not for
    /// GET, HEAD and OPTIONS.
    body: bool,
}

/// Headers the proxy does not pass on: its own, the hop's, and `Host`
/// (it writes the one the policy checked).
const DROPPED: &[&str] = &[
    "host",
    "connection",
    "proxy-connection",
    "proxy-authorization",
    "keep-alive",
    "upgrade",
    "te",
    "trailer",
];

impl Request {
    fn parse(head: &str) -> Result<Request, String> {
        let head = head.strip_suffix("\r\n\r\n").unwrap_or(head);
        let mut lines = head.split("\r\n");
        if lines.clone().any(|l| l.contains(['\r', '\n'])) {
            return Err("a bare CR or LF in the request's head".into());
        }
        let line = lines.next().unwrap_or_default();
        let mut parts = line.split(' ');
        let (Some(method), Some(target), Some(version), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(format!("not an HTTP request line: {line:?}"));
        };
        if !version.starts_with("HTTP/1.") {
            return Err(format!("{version} is not HTTP/1.x"));
        }
        if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) {
            return Err(format!("{method:?} is not a method"));
        }
        if method == "CONNECT" {
            let (host, port) = host_port(target, None)?;
            return Ok(Request {
                method: method.into(),
                host,
                port,
                origin_form: None,
                body: true,
            });
        }
        let Some(rest) = target.strip_prefix("http://") else {
            return Err(format!(
                "{target:?}: a proxy request names http://HOST/... (https goes through CONNECT)"
            ));
        };
        let (authority, tail) = rest.split_at(rest.find(['/', '?']).unwrap_or(rest.len()));
        let path = match tail.starts_with('/') {
            true => tail.to_string(),
            false => format!("/{tail}"),
        };
        let (host, port) = host_port(authority, Some(80))?;
        let body = !matches!(method, "GET" | "HEAD" | "OPTIONS");
        let mut origin = format!("{method} {path} {version}\r\nHost: {authority}\r\n");
        for header in lines {
            let Some((name, _)) = header.split_once(':') else {
                return Err(format!("not a header: {header:?}"));
            };
            if name.is_empty() || name.contains([' ', '\t']) {
                return Err(format!("not a header name: {name:?}"));
            }
            let framed = ["content-length", "transfer-encoding"];
            if !body && framed.iter().any(|h| name.eq_ignore_ascii_case(h)) {
                return Err(format!(
                    "{method} through the proxy carries no body ({name})"
                ));
            }
            if !DROPPED.iter().any(|h| name.eq_ignore_ascii_case(h)) {
                origin.push_str(header);
                origin.push_str("\r\n");
            }
        }
        origin.push_str("Connection: close\r\n\r\n");
        Ok(Request {
            method: method.into(),
            host,
            port,
            origin_form: Some(origin),
            body,
        })
    }
}

/// `host:port` (`[v6]:port`), the port defaulting to `default`.
fn host_port(authority: &str, default: Option<u16>) -> Result<(String, u16), String> {
    let bad = || format!("{authority:?} is not HOST:PORT");
    let (host, port) = match authority.rsplit_once(':') {
        Some((host, port)) if !host.starts_with('[') || host.ends_with(']') => {
            (host, port.parse().map_err(|_| bad())?)
        }
        _ => (authority, default.ok_or_else(bad)?),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() || authority.contains(['@', '/', ' ']) {
        return Err(bad());
    }
    Ok((host.to_ascii_lowercase(), port))
}

/// A connection to `host:port`, trying each address it resolves to.
fn connect(host: &str, port: u16) -> Result<TcpStream, String> {
    let addresses = (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {host}: {e}"))?;
    let mut last = format!("{host} resolves to no address");
    for address in addresses {
        match TcpStream::connect_timeout(&address, CONNECT_TIME) {
            Ok(stream) => return Ok(stream),
            Err(e) => last = format!("cannot connect to {host}:{port}: {e}"),
        }
    }
    Err(last)
}

/// A stream that copies in both directions at once.
pub(crate) trait Duplex: Read + Write + Send + Sized + 'static {
    fn duplicate(&self) -> std::io::Result<Self>;
    fn close(&self, how: Shutdown);
}

impl Duplex for UnixStream {
    fn duplicate(&self) -> std::io::Result<Self> {
        self.try_clone()
    }
    fn close(&self, how: Shutdown) {
        let _ = self.shutdown(how);
    }
}

impl Duplex for TcpStream {
    fn duplicate(&self) -> std::io::Result<Self> {
        self.try_clone()
    }
    fn close(&self, how: Shutdown) {
        let _ = self.shutdown(how);
    }
}

/// Copies both ways until the far side ends, then closes the near one.
pub(crate) fn splice(client: impl Duplex, upstream: impl Duplex) {
    let (Ok(mut client_in), Ok(mut upstream_out)) = (client.duplicate(), upstream.duplicate())
    else {
        return;
    };
    let sending = std::thread::spawn(move || {
        let _ = std::io::copy(&mut client_in, &mut upstream_out);
        upstream_out.close(Shutdown::Write);
    });
    let (mut client, mut upstream) = (client, upstream);
    let _ = std::io::copy(&mut upstream, &mut client);
    client.close(Shutdown::Both);
    upstream.close(Shutdown::Both);
    let _ = sending.join();
}

fn refuse(client: &mut UnixStream, code: u16, reason: &str, why: &str) {
    let body = format!("airlock: {why}\n");
    let _ = write!(
        client,
        "HTTP/1.1 {code} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

/// Where a program finds the proxy, inside its root.
pub(crate) const INSIDE: &str = "/run/airlock/proxy.sock";

/// Whether `path` can be a proxy's socket (it exists, and is a socket).
pub(crate) fn is_socket(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::metadata(path).is_ok_and(|m| m.file_type().is_socket())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allow_all() -> Arc<Policy> {
        Arc::new(|_: &str, _: &str, _| Ok(()))
    }

    /// A connection's first line from the proxy.
    fn status(stream: &mut UnixStream) -> String {
        let mut reply = Vec::new();
        let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
        let _ = stream.read_to_end(&mut reply);
        String::from_utf8_lossy(&reply)
            .lines()
            .next()
            .unwrap_or_default()
            .to_string()
    }

    #[test]
    fn connections_past_the_bound_are_refused_and_a_dropped_proxy_closes_its_tunnels() {
        // A server that takes a connection and never answers or closes.
        let quiet = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = quiet.local_addr().unwrap().port();
        let held = std::thread::spawn(move || {
            let streams: Vec<_> = quiet.incoming().take(1).collect();
            std::thread::sleep(Duration::from_secs(30));
            drop(streams);
        });
        let proxy = Proxy::start(allow_all()).unwrap();
        let mut tunnel = UnixStream::connect(proxy.socket()).unwrap();
        write!(tunnel, "CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n").unwrap();
        let mut opened = [0; 39];
        tunnel.read_exact(&mut opened).unwrap();
        assert!(opened.starts_with(b"HTTP/1.1 200"));
        // Idle clients that send nothing hold their places.
        let idle: Vec<UnixStream> = (1..CONNECTIONS)
            .map(|_| UnixStream::connect(proxy.socket()).unwrap())
            .collect();
        let deadline = Instant::now() + Duration::from_secs(5);
        while proxy.shared.open().len() < CONNECTIONS {
            assert!(Instant::now() < deadline, "the idle clients were not taken");
            std::thread::sleep(Duration::from_millis(10));
        }
        let mut over = UnixStream::connect(proxy.socket()).unwrap();
        assert_eq!(status(&mut over), "HTTP/1.1 503 Service Unavailable");
        drop(proxy);
        // The tunnel ends with the proxy, though its far end never closes.
        let _ = tunnel.set_read_timeout(Some(Duration::from_secs(5)));
        assert_eq!(tunnel.read(&mut opened).unwrap(), 0);
        drop((idle, held));
    }

    #[test]
    fn requests_parse_to_what_the_policy_sees() {
        let connect =
            Request::parse("CONNECT Example.com:443 HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        assert_eq!(
            (connect.method.as_str(), connect.host.as_str(), connect.port),
            ("CONNECT", "example.com", 443)
        );
        assert_eq!(connect.origin_form, None);
        // The Host the policy checked is the one sent, whatever the client said.
        let get = Request::parse(
            "GET http://[::1]:8080/a?b HTTP/1.1\r\nHost: evil.example\r\nProxy-Connection: keep-alive\r\nUpgrade: h2c\r\nAccept: */*\r\n\r\n",
        )
        .unwrap();
        assert_eq!(
            (get.host.as_str(), get.port, get.body),
            ("::1", 8080, false)
        );
        assert_eq!(
            get.origin_form.as_deref(),
            Some(
                "GET /a?b HTTP/1.1\r\nHost: [::1]:8080\r\nAccept: */*\r\nConnection: close\r\n\r\n"
            )
        );
        let bare = Request::parse("HEAD http://example.com HTTP/1.0\r\n\r\n").unwrap();
        assert_eq!(bare.port, 80);
        assert!(bare.origin_form.unwrap().starts_with("HEAD / HTTP/1.0\r\n"));
        let post =
            Request::parse("POST http://example.com/x HTTP/1.1\r\nContent-Length: 2\r\n\r\n")
                .unwrap();
        assert!(post.body);
        for bad in [
            "GET /local HTTP/1.1\r\n\r\n",
            "GET https://example.com/ HTTP/1.1\r\n\r\n",
            "CONNECT example.com HTTP/1.1\r\n\r\n",
            "CONNECT user@example.com:443 HTTP/1.1\r\n\r\n",
            "GET http://example.com/ HTTP/2\r\n\r\n",
            "nonsense\r\n\r\n",
            // A second request hidden behind a bare LF, a folded line, a
            // body on a GET.
            "GET http://example.com/ HTTP/1.1\r\nX: a\n\nDELETE /x HTTP/1.1\r\n\r\n",
            "GET http://example.com/ HTTP/1.1\r\nX: a\r\n b\r\n\r\n",
            "GET http://example.com/ HTTP/1.1\r\nContent-Length: 9\r\n\r\n",
            "GET http://example.com/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
        ] {
            assert!(Request::parse(bad).is_err(), "{bad:?}");
        }
    }
}
