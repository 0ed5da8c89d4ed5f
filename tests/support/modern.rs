//! A raw MCP 2026-07-28 client for the tests: JSON-RPC requests with the
//! per-request `_meta` that version asks for, no `initialize`, no session;
//! over HTTP (one connection per request, the reply read as JSON or as an
//! SSE stream) or as lines for stdio.

use serde_json::{Value, json};
use std::io::{Read, Write};

/// The protocol version.
pub const VERSION: &str = "2026-07-28";

/// A request: `method` with `params`, and `_meta` carrying the version,
/// the client's capabilities and info, and `context` (the context id).
pub fn request(id: u64, method: &str, mut params: Value, context: Option<&str>) -> Value {
    let mut meta = json!({
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw-2026", "version": "1"},
    });
    if let Some(context) = context {
        meta["airlock/context"] = json!(context);
    }
    params["_meta"] = meta;
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// A `tools/call` of `tool` with `arguments`.
pub fn call(id: u64, tool: &str, arguments: Value, context: Option<&str>) -> Value {
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

/// POSTs `message` to `http://addr/mcp` with the headers 2026-07-28 asks
/// for, and reads the reply.
pub fn post(addr: &str, message: &Value) -> Reply {
    let body = message.to_string();
    let method = message["method"].as_str().unwrap_or_default();
    let mut headers = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         MCP-Protocol-Version: {VERSION}\r\nMcp-Method: {method}\r\n"
    );
    if let Some(name) = message["params"]["name"].as_str() {
        headers.push_str(&format!("Mcp-Name: {name}\r\n"));
    }
    let mut stream = std::net::TcpStream::connect(addr).expect("connect");
    write!(
        stream,
        "{headers}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("send");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).expect("read the reply");
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP reply: {raw:?}"));
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(n, v)| n == "transfer-encoding" && v.contains("chunked"));
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_owned()
    };
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

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if size == 0 || rest.len() < size {
            break;
        }
        out.push_str(&rest[..size]);
        body = rest[size..].trim_start_matches("\r\n");
    }
    out
}
