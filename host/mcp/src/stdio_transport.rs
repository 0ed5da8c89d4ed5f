//! `airlock mcp`'s stdio transport as MCP sees it: newline-delimited
//! JSON-RPC read from the input `stdio.rs` opens (a `tools/call`'s `task`
//! kept on the request, as `tasks.rs` needs) and written by a
//! [`LineWriter`].

use super::lines::{LineSender, LineWriter};
use super::tasks::requested;
use rmcp::RoleServer;
use rmcp::model::{
    CallToolRequest, ClientJsonRpcMessage, ClientRequest, ErrorCode, ErrorData, JsonRpcMessage,
    JsonRpcRequest, RequestId, ServerJsonRpcMessage,
};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::DEFAULT_MAX_LINE_LENGTH;
use serde::Deserialize;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, BufReader};

/// `airlock mcp`'s stdio transport: newline-delimited JSON-RPC, written by
/// a [`LineWriter`] (replies that finish together leave in one write) and
/// read here, so that a `tools/call`'s
/// `task` is kept (a [`TaskRequest`] on the request). As rmcp's reader
/// does, a line over 16 MiB is dropped and a blank line ignored; unlike
/// it, a line that is not JSON is answered Parse error (-32700, as
/// JSON-RPC asks), and JSON that is not a message Invalid Request
/// (-32600); the end of input ends the transport.
pub(super) struct Stdio<R: AsyncRead> {
    read: BufReader<R>,
    line: Vec<u8>,
    /// Dropping the rest of a line over the limit.
    discarding: bool,
    write: LineWriter,
}

/// What reading a line gave.
enum Line {
    Whole,
    Oversized,
    End,
}

/// What a line holds.
enum Read {
    Message(Box<ClientJsonRpcMessage>),
    Nothing,
    /// JSON that is no message this server reads, but for a notification
    /// (which gets no reply): its id, if it has one.
    NotAMessage(Option<RequestId>),
    /// Not JSON at all.
    NotJson,
}

impl<R> Stdio<R>
where
    R: AsyncRead + Send + Unpin,
{
    pub(super) fn new<W: AsyncWrite + Send + Unpin + 'static>(read: R, write: W) -> Stdio<R> {
        Stdio {
            read: BufReader::new(read),
            line: Vec::new(),
            discarding: false,
            write: LineWriter::new(write),
        }
    }

    /// What queues lines on this transport's output from elsewhere (a call
    /// answered outside rmcp's serve loop: `Ordered`'s `Answering`).
    pub(super) fn lines(&self) -> LineSender {
        self.write.sender()
    }

    /// Reads up to the next newline into `self.line`, never past the
    /// limit. Cancel-safe: only `fill_buf` waits, and it takes nothing, so
    /// a read dropped midway (rmcp reads in a `select!`) resumes the line.
    async fn read_line(&mut self) -> std::io::Result<Line> {
        loop {
            let available = self.read.fill_buf().await?;
            if available.is_empty() {
                return Ok(Line::End);
            }
            let newline = available.iter().position(|&b| b == b'\n');
            let take = newline.map_or(available.len(), |i| i + 1);
            let over =
                !self.discarding && self.line.len().saturating_add(take) > DEFAULT_MAX_LINE_LENGTH;
            if !self.discarding && !over {
                self.line.extend_from_slice(&available[..take]);
            }
            self.read.consume(take);
            if over {
                self.line.clear();
                self.discarding = newline.is_none();
                return Ok(Line::Oversized);
            }
            if newline.is_some() {
                if self.discarding {
                    self.discarding = false;
                } else {
                    return Ok(Line::Whole);
                }
            }
        }
    }
}

/// The message on `line` (its newline, a carriage return and a byte order
/// mark aside), with the task a `tools/call` asks for on it.
fn read_message(line: &[u8]) -> Read {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    if line.is_empty() {
        return Read::Nothing;
    }
    let read = match read_call(line) {
        Some(call) => Ok(call),
        None => serde_json::from_slice::<ClientJsonRpcMessage>(line),
    };
    match read {
        Ok(mut message) => {
            if let JsonRpcMessage::Request(JsonRpcRequest {
                request: ClientRequest::CallToolRequest(call),
                ..
            }) = &mut message
                && let Some(task) = requested(line)
            {
                call.extensions.insert(task);
            }
            Read::Message(Box::new(message))
        }
        Err(e) => {
            use serde_json::error::Category;
            if matches!(e.classify(), Category::Syntax | Category::Eof) {
                tracing::debug!("a line is not JSON: {e}");
                return Read::NotJson;
            }
            tracing::debug!("a line is not a JSON-RPC message: {e}");
            let value = serde_json::from_slice::<Value>(line).unwrap_or_default();
            let id = value.get("id");
            if id.is_none() && value.get("method").is_some() {
                return Read::Nothing;
            }
            Read::NotAMessage(id.and_then(|id| RequestId::deserialize(id).ok()))
        }
    }
}

/// A `tools/call` request on `line`, read straight into rmcp's type for
/// it; `None` for any other line, and for a call that type does not
/// read (the generic read below then says why). rmcp's generic message
/// type tries each request type in turn, building and dropping an error
/// for every one before `tools/call`: a seventh of the instructions a
/// call costs the server. What this gives is what the generic read gives.
fn read_call(line: &[u8]) -> Option<ClientJsonRpcMessage> {
    memchr::memmem::find(line, br#""tools/call""#)?;
    let call: JsonRpcRequest<CallToolRequest> = serde_json::from_slice(line).ok()?;
    Some(JsonRpcMessage::Request(JsonRpcRequest::new(
        call.id,
        ClientRequest::CallToolRequest(call.request),
    )))
}

/// `message` as a line of stdio's output: its JSON and a newline.
pub(crate) fn line_of(message: &ServerJsonRpcMessage) -> std::io::Result<Vec<u8>> {
    let mut line = serde_json::to_vec(message).map_err(std::io::Error::other)?;
    line.push(b'\n');
    Ok(line)
}

impl<R> Transport<RoleServer> for Stdio<R>
where
    R: AsyncRead + Send + Unpin,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let sent = line_of(&item).map(|line| self.write.send(line));
        async move { sent?.await }
    }

    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        loop {
            match self.read_line().await {
                Ok(Line::Whole) => {}
                Ok(Line::Oversized) => {
                    tracing::error!(
                        "a message on stdin is over {DEFAULT_MAX_LINE_LENGTH} bytes: dropped"
                    );
                    continue;
                }
                Ok(Line::End) => return None,
                Err(e) => {
                    tracing::error!("reading stdin failed: {e}");
                    return None;
                }
            }
            let read = read_message(&self.line);
            self.line.clear();
            match read {
                Read::Message(message) => return Some(*message),
                Read::Nothing => {}
                // Each answer is sent on its own: this read may be dropped
                // at any await.
                Read::NotAMessage(id) => {
                    let error = ErrorData::invalid_request(
                        "Invalid Request: the line is not a JSON-RPC message this server reads",
                        None,
                    );
                    tokio::spawn(self.send(ServerJsonRpcMessage::error(error, id)));
                }
                Read::NotJson => {
                    let error = ErrorData::new(
                        ErrorCode::PARSE_ERROR,
                        "Parse error: the line is not JSON",
                        None,
                    );
                    tokio::spawn(self.send(ServerJsonRpcMessage::error(error, None)));
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.write.close().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_read_directly_is_what_the_generic_read_gives() {
        let generic = |line: &str| serde_json::from_str::<ClientJsonRpcMessage>(line).unwrap();
        let as_json = |message: &ClientJsonRpcMessage| serde_json::to_value(message).unwrap();
        for line in [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":0}}}"#,
            r#"{"jsonrpc":"2.0","id":"a-7","method":"tools/call","params":{"name":"read","arguments":{"path":"ü/😀.txt","offset":18446744073709551615,"limit":-3,"f":1.5e300,"n":null,"l":[true,{"x":[]}]}}}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"_meta":{"progressToken":"p1","io.example/k":[1]},"name":"sleep","arguments":{"ms":1}}}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"sleep","task":{"ttl":60000}},"extra":true}"#,
            r#"{"params":{"name":"glob"},"method":"tools/call","id":4,"jsonrpc":"2.0"}"#,
            r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"sleep","requestState":"s","inputResponses":{}}}"#,
        ] {
            let direct = read_call(line.as_bytes()).unwrap_or_else(|| panic!("not read: {line}"));
            assert_eq!(as_json(&direct), as_json(&generic(line)), "{line}");
        }
        for line in [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"name":"tools/call"}}"#,
            r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"sleep"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{}}}"#,
            r#"{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"sleep"}}"#,
        ] {
            assert!(read_call(line.as_bytes()).is_none(), "{line}");
        }
    }
}
