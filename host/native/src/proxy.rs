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

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Admits a request (`method`, `host`, `port`), or says why not.
pub type Policy = dyn Fn(&str, &str, u16) -> Result<(), String> + Send + Sync;

/// The most a request's head may hold.
const HEAD_BYTES: usize = 32 << 10;
/// How long a client has to send its request's head.
const HEAD_TIME: Duration = Duration::from_secs(30);
/// How long a connection to the host it asked for may take.
const CONNECT_TIME: Duration = Duration::from_secs(10);

/// A running proxy; it stops taking connections when dropped (tunnels
/// already open run until either end closes).
pub struct Proxy {
    dir: tempfile::TempDir,
    stopped: Arc<AtomicBool>,
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
        let stopped = Arc::new(AtomicBool::new(false));
        let stop = stopped.clone();
        std::thread::Builder::new()
            .name("airlock-proxy".into())
            .spawn(move || {
                for client in listener.incoming() {
                    if stop.load(Ordering::Acquire) {
                        break;
                    }
                    let Ok(client) = client else { continue };
                    let policy = policy.clone();
                    let _ = std::thread::Builder::new()
                        .name("airlock-proxy-conn".into())
                        .spawn(move || serve(client, &*policy));
                }
            })?;
        Ok(Proxy { dir, stopped })
    }

    /// The socket it listens on.
    pub fn socket(&self) -> PathBuf {
        self.dir.path().join("proxy.sock")
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stopped.store(true, Ordering::Release);
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

/// One client connection: its request admitted and sent on, or refused.
fn serve(mut client: UnixStream, policy: &Policy) {
    let _ = client.set_read_timeout(Some(HEAD_TIME));
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
    let _ = client.set_read_timeout(None);
    let sent = match &request.origin_form {
        None => client.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n"),
        Some(head) => upstream.write_all(head.as_bytes()),
    };
    if sent.is_err() || upstream.write_all(&rest).is_err() {
        return;
    }
    splice(client, upstream);
}

/// Reads up to the end of a request's head; returns the head and what
/// came after it.
fn read_head(client: &mut UnixStream) -> Result<(String, Vec<u8>), String> {
    let mut buffer = Vec::with_capacity(4096);
    let mut chunk = [0; 4096];
    loop {
        let n = client
            .read(&mut chunk)
            .map_err(|e| format!("reading the request: {e}"))?;
        if n == 0 {
            return Err("the request ended before its head".into());
        }
        buffer.extend_from_slice(&chunk[..n]);
        if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buffer.split_off(end + 4);
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
}

impl Request {
    fn parse(head: &str) -> Result<Request, String> {
        let mut lines = head.split("\r\n");
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
        if method == "CONNECT" {
            let (host, port) = host_port(target, None)?;
            return Ok(Request {
                method: method.into(),
                host,
                port,
                origin_form: None,
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
        let mut origin = format!("{method} {path} {version}\r\n");
        for header in lines.filter(|l| !l.is_empty()) {
            let name = header.split(':').next().unwrap_or_default().trim();
            let hop = [
                "connection",
                "proxy-connection",
                "proxy-authorization",
                "keep-alive",
            ];
            if !hop.iter().any(|h| name.eq_ignore_ascii_case(h)) {
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

    #[test]
    fn requests_parse_to_what_the_policy_sees() {
        let connect =
            Request::parse("CONNECT Example.com:443 HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        assert_eq!(
            (connect.method.as_str(), connect.host.as_str(), connect.port),
            ("CONNECT", "example.com", 443)
        );
        assert_eq!(connect.origin_form, None);
        let get = Request::parse(
            "GET http://[::1]:8080/a?b HTTP/1.1\r\nHost: [::1]:8080\r\nProxy-Connection: keep-alive\r\n\r\n",
        )
        .unwrap();
        assert_eq!((get.host.as_str(), get.port), ("::1", 8080));
        assert_eq!(
            get.origin_form.as_deref(),
            Some("GET /a?b HTTP/1.1\r\nHost: [::1]:8080\r\nConnection: close\r\n\r\n")
        );
        let bare = Request::parse("HEAD http://example.com HTTP/1.0\r\n\r\n").unwrap();
        assert_eq!(bare.port, 80);
        assert!(bare.origin_form.unwrap().starts_with("HEAD / HTTP/1.0\r\n"));
        for bad in [
            "GET /local HTTP/1.1\r\n\r\n",
            "GET https://example.com/ HTTP/1.1\r\n\r\n",
            "CONNECT example.com HTTP/1.1\r\n\r\n",
            "CONNECT user@example.com:443 HTTP/1.1\r\n\r\n",
            "GET http://example.com/ HTTP/2\r\n\r\n",
            "nonsense\r\n\r\n",
        ] {
            assert!(Request::parse(bad).is_err(), "{bad:?}");
        }
    }
}
