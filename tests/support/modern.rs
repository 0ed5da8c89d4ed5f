//! A raw MCP 2026-07-28 client for the tests: JSON-RPC requests with the
//! per-request `_meta` that version asks for, no `initialize`, no session;
//! over HTTP (a kept-alive connection, the reply read as JSON or as an SSE
//! stream) or as lines for stdio.

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;

/// The protocol version.
pub const VERSION: &str = "2026-07-28";

/// Which agent context a request names in `_meta["airlock/context"]`.
#[derive(Clone, Copy, Debug)]
pub enum Cx<'a> {
    /// None: the default context, shared by every call that names none.
    Default,
    /// `"new"`: a new context, whose id the result hands out.
    New,
    /// A context id a result handed out.
    Id(&'a str),
}

/// A request: `method` with `params`, and `_meta` carrying the version,
/// the client's capabilities and info, and `context`.
pub fn request(id: u64, method: &str, mut params: Value, context: Cx) -> Value {
    let mut meta = json!({
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw-2026", "version": "1"},
    });
    match context {
        Cx::Default => {}
        Cx::New => meta["airlock/context"] = json!("new"),
        Cx::Id(id) => meta["airlock/context"] = json!(id),
    }
    params["_meta"] = meta;
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// A `tools/call` of `tool` with `arguments`.
pub fn call(id: u64, tool: &str, arguments: Value, context: Cx) -> Value {
    request(
        id,
        "tools/call",
        json!({"name": tool, "arguments": arguments}),
        context,
    )
}

/// The context id a result handed out.
pub fn context_of(reply: &Value) -> Option<String> {
    reply["result"]["_meta"]["airlock/context"]
        .as_str()
        .map(str::to_owned)
}

/// The text of a `tools/call` result.
pub fn text(reply: &Value) -> String {
    reply["result"]["content"]
        .as_array()
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// An HTTP reply: the status, the headers (names lowercased) and the
/// JSON-RPC message answering the request.
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub message: Value,
}

impl Reply {
    /// The value of header `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A kept-alive HTTP/1.1 connection to `http://addr/mcp`.
pub struct Connection {
    stream: BufReader<TcpStream>,
    addr: String,
    /// The `Authorization` header's value, sent with every request.
    pub authorization: Option<String>,
    /// More headers sent with every request.
    pub headers: Vec<(String, String)>,
}

impl Connection {
    /// Connects to `addr`.
    pub fn open(addr: &str) -> Connection {
        let stream = TcpStream::connect(addr).expect("connect");
        stream.set_nodelay(true).expect("TCP_NODELAY");
        Connection {
            stream: BufReader::new(stream),
            addr: addr.to_owned(),
            authorization: None,
            headers: Vec::new(),
        }
    }

    /// POSTs `message` with the headers 2026-07-28 asks for, and reads the
    /// reply (its body by `Content-Length` or chunked).
    pub fn post(&mut self, message: &Value) -> Reply {
        let body = message.to_string();
        let method = message["method"].as_str().unwrap_or_default();
        let mut request = format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\n\
             Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
             MCP-Protocol-Version: {VERSION}\r\nMcp-Method: {method}\r\n",
            self.addr
        );
        // The name a request carries: a tool's, or a resource's URI.
        let params = &message["params"];
        if let Some(name) = params["name"].as_str().or(params["uri"].as_str()) {
            request.push_str(&format!("Mcp-Name: {name}\r\n"));
        }
        if let Some(authorization) = &self.authorization {
            request.push_str(&format!("Authorization: {authorization}\r\n"));
        }
        for (name, value) in &self.headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        request.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
        self.stream
            .get_mut()
            .write_all(request.as_bytes())
            .expect("send");
        let mut line = String::new();
        self.stream.read_line(&mut line).expect("a status line");
        let status = line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("not an HTTP reply: {line:?}"));
        let mut headers = Vec::new();
        loop {
            line.clear();
            self.stream.read_line(&mut line).expect("a header");
            let Some((name, value)) = line.trim_end().split_once(':') else {
                break;
            };
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
        let header = |name: &str| {
            headers
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.as_str())
        };
        let mut body = Vec::new();
        if let Some(length) = header("content-length").and_then(|v| v.parse::<usize>().ok()) {
            body.resize(length, 0);
            self.stream.read_exact(&mut body).expect("the body");
        } else if header("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
            loop {
                line.clear();
                self.stream.read_line(&mut line).expect("a chunk size");
                let size = usize::from_str_radix(line.trim(), 16).expect("a chunk size");
                let mut chunk = vec![0; size + 2];
                self.stream.read_exact(&mut chunk).expect("a chunk");
                if size == 0 {
                    break;
                }
                body.extend_from_slice(&chunk[..size]);
            }
        } else {
            self.stream.read_to_end(&mut body).expect("the body");
        }
        // The server ends the connection after this reply (nginx does
        // after `keepalive_requests`): the next request opens another.
        if header("connection").is_some_and(|v| v.eq_ignore_ascii_case("close")) {
            let authorization = self.authorization.take();
            let headers = std::mem::take(&mut self.headers);
            *self = Connection::open(&self.addr.clone());
            self.authorization = authorization;
            self.headers = headers;
        }
        let body = String::from_utf8_lossy(&body).into_owned();
        let id = &message["id"];
        let message = if body.trim_start().starts_with('{') {
            serde_json::from_str(body.trim()).unwrap_or_else(|e| panic!("{e}: {body}"))
        } else {
            body.lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
                .find(|m| &m["id"] == id)
                .unwrap_or(Value::Null)
        };
        Reply {
            status,
            headers,
            message,
        }
    }
}

/// POSTs `message` to `http://addr/mcp` on a connection of its own.
pub fn post(addr: &str, message: &Value) -> Reply {
    Connection::open(addr).post(message)
}
