//! The reply to a POSTed request: one JSON object when it can be, else an
//! SSE stream that ends with the request's response.
//!
//! Over Streamable HTTP, rmcp answers every request of a session with an
//! SSE stream: a priming event, the request's notifications and requests,
//! and last its response; it ends the stream from another task a moment
//! after the response, so the end of the body reached the client in a
//! segment of its own. HTTP clients that stop reading at the response (the
//! Python SDK closes the response there) found the body unfinished and
//! dropped the connection: every call paid a new TCP connection.
//!
//! [`reply`] holds the stream's headers until its first message. When that
//! is the response, the reply is that one JSON object (`application/json`,
//! which MCP lets a server choose per request); otherwise, or when nothing
//! came within [`HOLD`], the stream goes out as it was, and
//! [`EndAtResponse`] ends it right after the response event, so hyper
//! writes the last event and the end of the body together.

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, SizeHint};
use serde::Deserialize;
use serde::de::IgnoredAny;
use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

type HttpBody = http_body_util::combinators::BoxBody<Bytes, std::convert::Infallible>;

/// How long a reply waits for its first message before it streams: a call
/// that runs longer than this silently gets the SSE stream (and rmcp's
/// keep-alive comments) rather than holding its headers back.
pub(super) const HOLD: Duration = Duration::from_secs(10);

/// The id of a JSON-RPC request (a message with a `method` and an `id`);
/// `None` for a notification, a response or anything else.
pub(super) fn request_id(body: &[u8]) -> Option<serde_json::Value> {
    let head: Head = serde_json::from_slice(body).ok()?;
    head.method.and(head.id)
}

/// What tells a request, a response and a notification apart.
#[derive(Deserialize)]
struct Head {
    id: Option<serde_json::Value>,
    method: Option<IgnoredAny>,
}

/// What one chunk of the stream holds.
#[derive(Debug, PartialEq)]
enum Chunk<'a> {
    /// No message: the priming event, a comment.
    Nothing,
    /// The response to the request, alone: the message's JSON.
    Response(&'a [u8]),
    /// Anything else: a notification, a request to the client, several
    /// events, an event split across chunks.
    Other,
}

/// Reads a chunk of the stream of request `id`.
fn chunk<'a>(data: &'a [u8], id: &serde_json::Value) -> Chunk<'a> {
    let mut messages = data
        .split(|&b| b == b'\n')
        .filter_map(|line| line.strip_prefix(b"data:"))
        .map(<[u8]>::trim_ascii)
        .filter(|message| !message.is_empty());
    let message = match (messages.next(), messages.next()) {
        (None, _) => return Chunk::Nothing,
        (Some(message), None) => message,
        (Some(_), Some(_)) => return Chunk::Other,
    };
    match serde_json::from_slice::<Head>(message) {
        Ok(head) if head.method.is_none() && head.id.as_ref() == Some(id) => {
            Chunk::Response(message)
        }
        _ => Chunk::Other,
    }
}

/// The reply to request `id`, from rmcp's SSE `response` (see the module
/// header).
pub(super) async fn reply(
    response: http::Response<HttpBody>,
    id: serde_json::Value,
) -> http::Response<HttpBody> {
    reply_within(response, id, HOLD).await
}

/// [`reply`], holding the headers at most `hold`.
async fn reply_within(
    response: http::Response<HttpBody>,
    id: serde_json::Value,
    hold: Duration,
) -> http::Response<HttpBody> {
    let (mut parts, mut body) = response.into_parts();
    let mut held = VecDeque::new();
    let deadline = tokio::time::Instant::now() + hold;
    while let Ok(Some(Ok(frame))) = tokio::time::timeout_at(deadline, body.frame()).await {
        let read = frame.data_ref().map(|data| match chunk(data, &id) {
            Chunk::Response(message) => Some(Bytes::copy_from_slice(message)),
            Chunk::Nothing => None,
            Chunk::Other => Some(Bytes::new()),
        });
        match read {
            Some(Some(message)) if !message.is_empty() => {
                parts.headers.insert(
                    http::header::CONTENT_TYPE,
                    http::HeaderValue::from_static("application/json"),
                );
                parts.headers.remove(http::header::CACHE_CONTROL);
                parts.headers.remove("x-accel-buffering");
                let body = http_body_util::Full::new(message).boxed();
                return http::Response::from_parts(parts, body);
            }
            Some(None) => held.push_back(frame),
            _ => {
                held.push_back(frame);
                break;
            }
        }
    }
    let streamed = EndAtResponse {
        held,
        inner: body,
        id,
        done: false,
    };
    http::Response::from_parts(parts, streamed.boxed())
}

/// A POST's SSE body that yields the chunks already read, then the rest
/// of the stream, and ends right after the event carrying the response to
/// request `id`.
struct EndAtResponse<B> {
    held: VecDeque<Frame<Bytes>>,
    inner: B,
    id: serde_json::Value,
    done: bool,
}

impl<B> Body for EndAtResponse<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        if let Some(frame) = self.held.pop_front() {
            return Poll::Ready(Some(Ok(frame)));
        }
        if self.done {
            return Poll::Ready(None);
        }
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled
            && let Some(data) = frame.data_ref()
            && matches!(chunk(data, &self.id), Chunk::Response(_))
        {
            self.done = true;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.held.is_empty() && (self.done || self.inner.is_end_stream())
    }

    fn size_hint(&self) -> SizeHint {
        if self.is_end_stream() {
            SizeHint::with_exact(0)
        } else {
            SizeHint::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::StreamBody;
    use serde_json::json;

    const PRIMING: &str = "data: \nid: 0/0\nretry: 3000\n\n";
    const PROGRESS: &str = "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":7}}\nid: 1/0\n\n";
    const RESPONSE: &str = "data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\nid: 2/0\n\n";

    /// rmcp's reply to request 7: `events`, then a stream that never ends
    /// (as rmcp's does until its task closes it).
    fn rmcp_reply(events: &[&str]) -> http::Response<HttpBody> {
        let frames: Vec<Result<Frame<Bytes>, std::convert::Infallible>> = events
            .iter()
            .map(|e| Ok(Frame::data(Bytes::from(e.to_string()))))
            .collect();
        let body = StreamBody::new(futures::StreamExt::chain(
            futures::stream::iter(frames),
            futures::stream::pending(),
        ));
        http::Response::builder()
            .header(http::header::CONTENT_TYPE, "text/event-stream")
            .header("mcp-session-id", "s")
            .body(body.boxed())
            .unwrap()
    }

    async fn text(response: http::Response<HttpBody>) -> String {
        let body = tokio::time::timeout(Duration::from_secs(5), response.into_body().collect())
            .await
            .expect("the body ends")
            .unwrap()
            .to_bytes();
        String::from_utf8(body.to_vec()).unwrap()
    }

    fn content_type(response: &http::Response<HttpBody>) -> &str {
        response.headers()[http::header::CONTENT_TYPE]
            .to_str()
            .unwrap()
    }

    #[tokio::test]
    async fn a_response_that_comes_first_is_one_json_object() {
        let response = reply(rmcp_reply(&[PRIMING, RESPONSE]), json!(7)).await;
        assert_eq!(content_type(&response), "application/json");
        assert_eq!(response.headers()["mcp-session-id"], "s");
        assert_eq!(
            text(response).await,
            r#"{"jsonrpc":"2.0","id":7,"result":{}}"#
        );
    }

    #[tokio::test]
    async fn after_a_notification_the_stream_ends_with_the_response_event() {
        let response = reply(rmcp_reply(&[PRIMING, PROGRESS, RESPONSE]), json!(7)).await;
        assert_eq!(content_type(&response), "text/event-stream");
        assert_eq!(
            text(response).await,
            format!("{PRIMING}{PROGRESS}{RESPONSE}")
        );
    }

    #[tokio::test]
    async fn a_reply_with_nothing_to_say_streams_after_the_hold() {
        let hold = Duration::from_millis(50);
        let response = reply_within(rmcp_reply(&[PRIMING]), json!(7), hold).await;
        assert_eq!(content_type(&response), "text/event-stream");
        let mut body = response.into_body();
        let first = body.frame().await.unwrap().unwrap();
        assert_eq!(first.data_ref().unwrap(), PRIMING.as_bytes());
    }

    #[tokio::test]
    async fn another_ids_response_or_a_request_with_the_id_does_not_end_it() {
        let events = [
            PROGRESS,
            "data: {\"jsonrpc\":\"2.0\",\"id\":\"7\",\"result\":{}}\n\n",
            "data: {\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"elicitation/create\"}\n\n",
        ];
        let mut body = reply(rmcp_reply(&events), json!(7)).await.into_body();
        for _ in 0..3 {
            assert!(body.frame().await.is_some());
            assert!(!body.is_end_stream());
        }
        let next = tokio::time::timeout(Duration::from_millis(50), body.frame()).await;
        assert!(next.is_err(), "the body waits for its response");
    }

    #[test]
    fn chunks_are_read_by_what_they_carry() {
        let id = json!(7);
        assert_eq!(chunk(PRIMING.as_bytes(), &id), Chunk::Nothing);
        assert_eq!(chunk(b": keep-alive\n\n", &id), Chunk::Nothing);
        assert_eq!(chunk(PROGRESS.as_bytes(), &id), Chunk::Other);
        assert_eq!(
            chunk(RESPONSE.as_bytes(), &id),
            Chunk::Response(br#"{"jsonrpc":"2.0","id":7,"result":{}}"#)
        );
        let both = format!("{PROGRESS}{RESPONSE}");
        assert_eq!(chunk(both.as_bytes(), &id), Chunk::Other);
    }

    #[test]
    fn only_requests_have_a_request_id() {
        assert_eq!(
            request_id(br#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{}}"#),
            Some(json!("a"))
        );
        assert_eq!(
            request_id(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            None
        );
        assert_eq!(request_id(br#"{"jsonrpc":"2.0","id":3,"result":{}}"#), None);
        assert_eq!(request_id(b"not json"), None);
    }
}
