//! Bounds on what an external server sends, enforced while it is read:
//! the length of one line on its stdout (one JSON-RPC message), checked
//! before rmcp buffers the line, and the pages, tools and bytes of its
//! tool listing and the size and depth of each schema, checked page by
//! page. Past one, the server is unavailable, with a message naming the
//! bound.

use crate::SERVER_ERROR_CHARS;
use airlock_core::json;
use airlock_core::sanitize::{self, Sink};
use rmcp::RoleClient;
use rmcp::model::{JsonObject, PaginatedRequestParams, Tool};
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, ready};
use tokio::io::{AsyncRead, ReadBuf};

/// The most pages of one `tools/list` (a server that sends `nextCursor`
/// forever is refused after these).
pub(crate) const MAX_PAGES: usize = 100;
/// The most tools one `tools/list` may give, over all its pages.
pub(crate) const MAX_TOOLS: usize = 10_000;
/// The most bytes one `tools/list` may give, over all its pages, its tools
/// counted as JSON.
pub(crate) const MAX_LISTING_BYTES: usize = 16 << 20;
/// The most bytes of one tool's input or output schema, as JSON.
pub(crate) const MAX_SCHEMA_BYTES: usize = 64 << 10;
/// The deepest one tool's input or output schema may nest (the schema
/// object itself is 1, as `airlock_core::json::depth` counts).
pub(crate) const MAX_SCHEMA_DEPTH: usize = 32;
/// What one message may hold beyond the larger of `limits.output_bytes`
/// and [`MAX_LISTING_BYTES`]: the JSON-RPC envelope, the fields around the
/// content, and JSON's escapes.
pub(crate) const MESSAGE_HEADROOM: usize = 1 << 20;

/// The most bytes of one line on a server's stdout (one message, its
/// newline included) when calls may return `output_bytes`: a result at the
/// output limit, or a listing at its bound, still fits.
pub(crate) fn line_bound(output_bytes: usize) -> usize {
    output_bytes
        .max(MAX_LISTING_BYTES)
        .saturating_add(MESSAGE_HEADROOM)
}

/// A server's stdout bound, and what the reader refused of it: shared by
/// the reader, the connection and its tools.
pub(crate) struct Stdout {
    bound: AtomicUsize,
    refused: OnceLock<String>,
}

impl Stdout {
    pub(crate) fn new(bound: usize) -> Stdout {
        Stdout {
            bound: AtomicUsize::new(bound),
            refused: OnceLock::new(),
        }
    }

    /// Sets the line bound (a later load's, when it reuses the server).
    pub(crate) fn set_bound(&self, bound: usize) {
        self.bound.store(bound, Ordering::Relaxed);
    }

    /// Why the reader stopped reading the server, once it did.
    pub(crate) fn refused(&self) -> Option<&str> {
        self.refused.get().map(String::as_str)
    }

    /// An error of the connection, for a load failure: why the reader
    /// stopped, when it did (the connection closed because of it), else
    /// `what` and the error.
    pub(crate) fn explain(&self, what: &str, e: &dyn std::fmt::Display) -> String {
        match self.refused() {
            Some(why) => why.to_string(),
            None => server_error(what, e),
        }
    }
}

/// A server's stdout that refuses a line longer than its bound before
/// rmcp's transport buffers it: the bytes of that line are withheld and
/// the read fails, which closes the connection (rmcp's own cap, which
/// drops such a line and leaves its request waiting, is lifted: this is
/// the one).
pub(crate) struct BoundedLines<R> {
    inner: R,
    /// Bytes of the current line read so far.
    line: usize,
    stdout: Arc<Stdout>,
}

impl<R> BoundedLines<R> {
    pub(crate) fn new(inner: R, stdout: Arc<Stdout>) -> BoundedLines<R> {
        BoundedLines {
            inner,
            line: 0,
            stdout,
        }
    }

    fn refusal(&self) -> io::Error {
        io::Error::new(
            io::ErrorKind::InvalidData,
            self.stdout.refused().unwrap_or_default().to_string(),
        )
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for BoundedLines<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.stdout.refused().is_some() {
            return Poll::Ready(Err(this.refusal()));
        }
        let start = buf.filled().len();
        ready!(Pin::new(&mut this.inner).poll_read(cx, buf))?;
        let bound = this.stdout.bound.load(Ordering::Relaxed);
        let mut rest = &buf.filled()[start..];
        let mut kept = start;
        let mut line = this.line;
        let over = loop {
            let (len, ends) = match rest.iter().position(|&b| b == b'\n') {
                Some(i) => (i + 1, true),
                None => (rest.len(), false),
            };
            if line.saturating_add(len) > bound {
                break true;
            }
            kept += len;
            rest = &rest[len..];
            line = if ends { 0 } else { line + len };
            if rest.is_empty() {
                break false;
            }
        };
        this.line = line;
        if !over {
            return Poll::Ready(Ok(()));
        }
        let _ = this.stdout.refused.set(format!(
            "it sent a message (one line on its stdout) of more than {bound} bytes, \
             the bound on one message"
        ));
        buf.set_filled(kept);
        if kept > start {
            // The whole lines before it are delivered; the next read fails.
            Poll::Ready(Ok(()))
        } else {
            Poll::Ready(Err(this.refusal()))
        }
    }
}

/// Lists a server's tools page by page, refusing a listing past
/// [`MAX_PAGES`], [`MAX_TOOLS`] or [`MAX_LISTING_BYTES`], or a tool whose
/// schema is past [`MAX_SCHEMA_BYTES`] or [`MAX_SCHEMA_DEPTH`], as soon as
/// the page that crosses it arrives.
pub(crate) async fn list_tools(
    peer: &rmcp::Peer<RoleClient>,
    stdout: &Stdout,
) -> Result<Vec<Tool>, String> {
    let mut tools = Vec::new();
    let mut bytes = 0usize;
    let mut cursor = None;
    for _ in 0..MAX_PAGES {
        let params = PaginatedRequestParams::default().with_cursor(cursor);
        let page = peer
            .list_tools(Some(params))
            .await
            .map_err(|e| stdout.explain("tools/list failed", &e))?;
        if tools.len() + page.tools.len() > MAX_TOOLS {
            return Err(format!("its tools/list ran past {MAX_TOOLS} tools"));
        }
        for tool in page.tools {
            bytes = bytes.saturating_add(json_size(|w| serde_json::to_writer(w, &tool)));
            if bytes > MAX_LISTING_BYTES {
                return Err(format!(
                    "its tools/list ran past {MAX_LISTING_BYTES} bytes of tools as JSON"
                ));
            }
            check_schema(&tool, "input", &tool.input_schema)?;
            if let Some(schema) = &tool.output_schema {
                check_schema(&tool, "output", schema)?;
            }
            tools.push(tool);
        }
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return Ok(tools),
        }
    }
    Err(format!("its tools/list ran past {MAX_PAGES} pages"))
}

/// Refuses a schema of `tool` past [`MAX_SCHEMA_BYTES`] or
/// [`MAX_SCHEMA_DEPTH`].
fn check_schema(tool: &Tool, which: &str, schema: &JsonObject) -> Result<(), String> {
    let name = || sanitize::clean_capped(&tool.name, Sink::Line, 100);
    let size = json_size(|w| serde_json::to_writer(w, schema));
    if size > MAX_SCHEMA_BYTES {
        return Err(format!(
            "the {which} schema of its tool {:?} is {size} bytes of JSON; the bound is \
             {MAX_SCHEMA_BYTES}",
            name()
        ));
    }
    let depth = 1 + schema.values().map(json::depth).max().unwrap_or(0);
    if depth > MAX_SCHEMA_DEPTH {
        return Err(format!(
            "the {which} schema of its tool {:?} nests {depth} levels deep; the bound is \
             {MAX_SCHEMA_DEPTH}",
            name()
        ));
    }
    Ok(())
}

/// A writer that counts the bytes written to it, and keeps none.
struct Count(usize);

impl io::Write for Count {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.0 += bytes.len();
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The bytes `write` writes as JSON (`serde_json::to_writer` of a value),
/// counted, not kept; `usize::MAX`, past every bound, if it fails.
fn json_size(write: impl FnOnce(&mut Count) -> serde_json::Result<()>) -> usize {
    let mut count = Count(0);
    match write(&mut count) {
        Ok(()) => count.0,
        Err(_) => usize::MAX,
    }
}

/// An error a server caused, for a load failure: `what`, then the error
/// as one cleaned line (its text may come from the server).
pub(crate) fn server_error(what: &str, e: &dyn std::fmt::Display) -> String {
    let e = sanitize::clean_capped(&e.to_string(), Sink::Line, SERVER_ERROR_CHARS);
    format!("{what}: {e}")
}

#[cfg(test)]
mod tests {
    use super::{BoundedLines, Stdout};
    use std::sync::Arc;
    use tokio::io::{AsyncRead, AsyncReadExt};

    /// What `reader` gives until it fails, and how it failed.
    async fn read_until_refused(mut reader: impl AsyncRead + Unpin) -> (Vec<u8>, String) {
        let mut got = Vec::new();
        let mut buf = [0u8; 64];
        loop {
            match reader.read(&mut buf).await {
                Ok(0) => panic!("read to the end: {got:?}"),
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) => {
                    assert!(reader.read(&mut buf).await.is_err(), "it stays refused");
                    return (got, e.to_string());
                }
            }
        }
    }

    #[tokio::test]
    async fn a_line_past_the_bound_is_refused_after_the_lines_before_it() {
        let stdout = Arc::new(Stdout::new(8));
        let input: &[u8] = b"1234567\nabc\n123456789\nnever";
        let (got, e) = read_until_refused(BoundedLines::new(input, stdout.clone())).await;
        assert_eq!(
            got, b"1234567\nabc\n",
            "a line of 8 bytes with its newline passes"
        );
        assert_eq!(
            e,
            "it sent a message (one line on its stdout) of more than 8 bytes, the bound on one message"
        );
        assert_eq!(stdout.refused(), Some(e.as_str()));

        // A line counts across reads.
        let stdout = Arc::new(Stdout::new(8));
        let input = (&b"ok\n1234"[..]).chain(&b"5678\n"[..]);
        let (got, e) = read_until_refused(BoundedLines::new(input, stdout)).await;
        assert_eq!(
            (got.as_slice(), e.contains("more than 8")),
            (&b"ok\n1234"[..], true)
        );
    }
}
