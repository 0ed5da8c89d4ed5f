//! The order of a connection's calls: `Ordered`, the transport that gives
//! each `tools/call` its turn as it is received and keeps its place until
//! its reply is written (`Turns`, `Replies`), and `Answering`, which
//! answers a call outside rmcp's serve loop on stdio.

use crate::lock;
use crate::server::McpServer;
use crate::turn::{Acknowledging, Closed, Received, Replies, Turn, TurnInner, Turns};
use crate::{lines, stdio_transport, tasks};
use airlock_host::UseEvents;
use rmcp::model::{
    ClientNotification, ClientRequest, GetExtensions, GetMeta, JsonRpcMessage, JsonRpcNotification,
    JsonRpcRequest, RequestId, ServerJsonRpcMessage,
};
use rmcp::service::{RequestContext, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::{Peer, RoleServer};
use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// A connection's transport that gives each `tools/call` request, as it
/// is received, its turn (and the connection's end, [`Received`]): rmcp
/// handles each request in a task of its own, and those tasks start in no
/// particular order, so the turn is what keeps calls in the client's order.
/// A call keeps its place in the executor until its reply is written
/// ([`Replies`]). When the peer closes the connection, the end is
/// signalled. It is also where MCP tasks meet rmcp: calls run as tasks and
/// `tasks/*` requests are turned into custom requests (`tasks::divert`),
/// and replies get what rmcp's types lack (`tasks::shape`).
pub(crate) struct Ordered<T> {
    inner: T,
    turns: Arc<Mutex<Turns>>,
    replies: Replies<UseEvents>,
    pub(crate) closed: CancellationToken,
    answering: Option<Answering>,
    /// A sender for each listen not yet handed to the server
    /// ([`Acknowledging`]), and where their end is seen.
    listens: Option<mpsc::Sender<()>>,
    listens_handed_over: mpsc::Receiver<()>,
    /// When the peer closed the connection, the time after which rmcp is
    /// told even if a listen was not handed over.
    ended: Option<Instant>,
}

/// How long the connection's end waits for listens to reach the server.
const LISTENS_HANDED_OVER: Duration = Duration::from_secs(1);

impl<T> Ordered<T> {
    pub(crate) fn new(inner: T) -> Ordered<T> {
        let (listens, listens_handed_over) = mpsc::channel(1);
        Ordered {
            inner,
            turns: Arc::default(),
            replies: Replies::default(),
            closed: CancellationToken::new(),
            answering: None,
            listens: Some(listens),
            listens_handed_over,
            ended: None,
        }
    }

    /// Plain calls are answered outside rmcp's serve loop ([`Answering`]).
    pub(crate) fn answering(mut self, answering: Answering) -> Ordered<T> {
        self.answering = Some(answering);
        self
    }
}

impl<T> Drop for Ordered<T> {
    /// However the connection's service ended, its end is signalled (a
    /// session's place under the cap is given back on it).
    fn drop(&mut self) {
        self.closed.cancel();
    }
}

impl<T: Transport<RoleServer>> Transport<RoleServer> for Ordered<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        mut item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        tasks::shape(&mut item);
        let id = match &item {
            JsonRpcMessage::Response(response) => Some(&response.id),
            JsonRpcMessage::Error(error) => error.id.as_ref(),
            _ => None,
        };
        let held = id.and_then(|id| self.replies.close(id));
        let sent = self.inner.send(item);
        async move {
            let sent = sent.await;
            drop(held);
            sent
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            if let Some(deadline) = self.ended {
                // rmcp's loop runs on until then, so it tells each listen
                // that its acknowledgement was written. (Dropped at this
                // await, the next receive waits again.)
                let _ = tokio::time::timeout_at(deadline, self.listens_handed_over.recv()).await;
                return None;
            }
            let message = self.receive_one().await;
            return match (&self.answering, message) {
                (Some(answering), Some(JsonRpcMessage::Request(request))) => {
                    match answering.answer(request, &self.closed, &self.replies) {
                        None => continue,
                        Some(request) => Some(JsonRpcMessage::Request(request)),
                    }
                }
                (_, None) => continue,
                (_, message) => message,
            };
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

impl<T: Transport<RoleServer>> Ordered<T> {
    /// The next message, a call given its turn.
    async fn receive_one(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        let mut message = self.inner.receive().await;
        match &mut message {
            Some(JsonRpcMessage::Request(JsonRpcRequest { request, id, .. })) => {
                if let ClientRequest::CallToolRequest(call) = request {
                    let number = {
                        let mut turns = lock(&self.turns);
                        turns.received += 1;
                        turns.received - 1
                    };
                    let turn = Turn(Arc::new(TurnInner {
                        number,
                        turns: self.turns.clone(),
                        taken: AtomicBool::new(false),
                    }));
                    self.replies.open(id.clone());
                    call.extensions_mut().insert(Received {
                        turn,
                        id: id.clone(),
                        replies: self.replies.clone(),
                        closed: self.closed.clone(),
                    });
                }
                // A listen ends with its connection, not after rmcp's wait
                // for the replies in flight.
                if let ClientRequest::SubscriptionsListenRequest(listen) = request {
                    listen.extensions.insert(Closed(self.closed.clone()));
                    let sender = self.listens.clone();
                    listen
                        .extensions
                        .insert(Acknowledging(Arc::new(Mutex::new(sender))));
                }
                tasks::divert(request);
            }
            // rmcp drops the reply of a call the client cancelled.
            Some(JsonRpcMessage::Notification(JsonRpcNotification {
                notification: ClientNotification::CancelledNotification(cancelled),
                ..
            })) => {
                if let Some(id) = &cancelled.params.request_id {
                    drop(self.replies.close(id));
                    if let Some(answering) = &self.answering {
                        answering.cancel(id);
                    }
                }
            }
            Some(_) => {}
            None => {
                self.closed.cancel();
                self.listens = None;
                self.ended = Some(Instant::now() + LISTENS_HANDED_OVER);
            }
        }
        message
    }
}

/// Plain `tools/call` requests answered outside rmcp's serve loop (on
/// stdio). rmcp runs a request in a task of its own, sends the handler's
/// reply back to its loop, and spawns a task there to write it: with the
/// writer's, five task hand-offs after the read, more than the three Tokio
/// runs in a row on one worker, so the rest went through its run queue,
/// waking the other worker for them. Here the call's own task runs the same handler (`Service::handle_request`, so the
/// reply is shaped as rmcp shapes it) and queues its reply on the output
/// itself. A call that names its protocol version in `_meta` (2026-07-28,
/// served statelessly) or arrives before the session's peer is known goes
/// through rmcp. Progress, log lines and questions go through the peer as
/// before, each handed to the output before the call goes on, so before
/// its reply.
pub(crate) struct Answering {
    /// The session's server and its peer, once `initialize` was answered.
    pub(crate) session: Arc<OnceLock<(McpServer, Peer<RoleServer>)>>,
    lines: lines::LineSender,
    /// The calls being answered here, by id, and what cancels each.
    calls: Arc<Mutex<HashMap<RequestId, CancellationToken>>>,
}

impl Answering {
    pub(crate) fn new(lines: lines::LineSender) -> Answering {
        Answering {
            session: Arc::default(),
            lines,
            calls: Arc::default(),
        }
    }

    /// Starts answering `request` if it is a plain call and the session is
    /// known; else gives it back, for rmcp. `closed` is the connection's end
    /// (which cancels the call), `replies` where its place is kept until
    /// its reply is written.
    fn answer(
        &self,
        request: JsonRpcRequest<ClientRequest>,
        closed: &CancellationToken,
        replies: &Replies<UseEvents>,
    ) -> Option<JsonRpcRequest<ClientRequest>> {
        let plain = matches!(request.request, ClientRequest::CallToolRequest(_))
            && request.request.get_meta().protocol_version().is_none();
        let Some((server, peer)) = self.session.get().filter(|_| plain) else {
            return Some(request);
        };
        let JsonRpcRequest {
            id,
            request: mut call,
            ..
        } = request;
        let ct = closed.child_token();
        lock(&self.calls).insert(id.clone(), ct.clone());
        let mut context = RequestContext::new(id.clone(), peer.clone());
        context.ct = ct.clone();
        std::mem::swap(&mut context.meta, call.get_meta_mut());
        std::mem::swap(&mut context.extensions, call.extensions_mut());
        let server = server.clone();
        let calls = self.calls.clone();
        let lines = self.lines.clone();
        let replies = replies.clone();
        let closed = closed.clone();
        // Boxed, so making the task and ending it move a pointer, not the
        // whole future (copied four times otherwise).
        tokio::spawn(Box::pin(async move {
            let result = rmcp::Service::handle_request(&server, call, context).await;
            ct.cancel();
            // A call the client cancelled gets no reply (as from rmcp).
            let cancelled = lock(&calls).remove(&id).is_none();
            let held = replies.close(&id);
            if cancelled {
                return;
            }
            let mut reply = match result {
                Ok(result) => ServerJsonRpcMessage::response(result, id),
                Err(error) => ServerJsonRpcMessage::error(error, Some(id)),
            };
            tasks::shape(&mut reply);
            let sent = match stdio_transport::line_of(&reply) {
                Ok(line) => lines.send(line).await,
                Err(e) => Err(e),
            };
            match sent {
                Ok(()) => {}
                // stdin closed: the output may be closed first.
                Err(e) if closed.is_cancelled() => {
                    tracing::debug!("a reply after the connection ended: {e}")
                }
                Err(e) => tracing::error!("writing a reply failed: {e}"),
            }
            drop(held);
        }));
        None
    }

    /// The client cancelled call `id`: if it is answered here, it stops.
    fn cancel(&self, id: &RequestId) {
        if let Some(ct) = lock(&self.calls).remove(id) {
            ct.cancel();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::McpHost;
    use airlock_host::Airlock;
    use rmcp::ServiceExt;
    use rmcp::model::ClientJsonRpcMessage;
    use serde_json::Value;
    use std::time::Duration;

    #[tokio::test]
    async fn a_dropped_turn_lets_the_next_one_go() {
        let ordered = Ordered::new(());
        let turn = |number| {
            Turn(Arc::new(TurnInner {
                number,
                turns: ordered.turns.clone(),
                taken: AtomicBool::new(false),
            }))
        };
        let (first, second, third) = (turn(0), turn(1), turn(2));
        let waiting = tokio::spawn(async move { third.wait().await });
        drop(second);
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "the first turn is not taken");
        first.wait().await;
        first.take();
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("the third turn comes")
            .unwrap();
        assert!(lock(&ordered.turns).waiting.is_empty(), "no waiter is left");
    }

    /// A call knows whether the connection received another after it (so
    /// it is one of a burst, and goes to the executor's scheduler).
    #[tokio::test]
    async fn a_call_is_followed_once_a_later_one_was_received() {
        use tokio::io::AsyncWriteExt;
        let (server_in, mut client_out) = tokio::io::duplex(1 << 16);
        let mut ordered = Ordered::new(stdio_transport::Stdio::new(server_in, tokio::io::sink()));
        let call = |id: u32| {
            format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"sleep","arguments":{{}}}}}}"#
            ) + "\n"
        };
        let mut next_turn = async || match ordered.receive().await {
            Some(JsonRpcMessage::Request(JsonRpcRequest {
                request: ClientRequest::CallToolRequest(call),
                ..
            })) => call.extensions().get::<Received>().unwrap().turn.clone(),
            other => panic!("not a call: {other:?}"),
        };
        client_out.write_all(call(1).as_bytes()).await.unwrap();
        let first = next_turn().await;
        assert!(!first.followed(), "nothing came after the first yet");
        client_out.write_all(call(2).as_bytes()).await.unwrap();
        let second = next_turn().await;
        assert!(first.followed());
        assert!(!second.followed());
    }

    /// A transport whose client is the test: what it sends comes from a
    /// channel, and the reply to request 1 takes 300 ms to be written.
    struct SlowFirstReply {
        from_client: tokio::sync::mpsc::UnboundedReceiver<ClientJsonRpcMessage>,
        /// Each reply's id, when it was handed over and when written.
        written: Arc<Mutex<Vec<(Value, std::time::Instant, std::time::Instant)>>>,
    }

    impl Transport<RoleServer> for SlowFirstReply {
        type Error = std::io::Error;

        fn send(
            &mut self,
            item: ServerJsonRpcMessage,
        ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
            let handed = std::time::Instant::now();
            let id = match &item {
                JsonRpcMessage::Response(r) => Some(serde_json::to_value(&r.id).unwrap()),
                JsonRpcMessage::Error(e) => {
                    e.id.as_ref().map(|id| serde_json::to_value(id).unwrap())
                }
                _ => None,
            };
            let written = self.written.clone();
            async move {
                if let Some(id) = id {
                    if id == 1 {
                        tokio::time::sleep(Duration::from_millis(300)).await;
                    }
                    lock(&written).push((id, handed, std::time::Instant::now()));
                }
                Ok(())
            }
        }

        async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
            self.from_client.recv().await
        }

        async fn close(&mut self) -> Result<(), Self::Error> {
            Ok(())
        }
    }

    /// A transport whose client is the test, where the acknowledgement of
    /// a listen is written only once the client has gone (`gone`): rmcp's
    /// loop sees the connection's end before it learns the acknowledgement
    /// was written.
    struct AckWrittenLate {
        from_client: tokio::sync::mpsc::UnboundedReceiver<ClientJsonRpcMessage>,
        gone: Arc<tokio::sync::Notify>,
    }

    impl Transport<RoleServer> for AckWrittenLate {
        type Error = std::io::Error;

        fn send(
            &mut self,
            item: ServerJsonRpcMessage,
        ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
            let ack = matches!(&item, JsonRpcMessage::Notification(n)
                if serde_json::to_value(&n.notification).unwrap()["method"]
                    == "notifications/subscriptions/acknowledged");
            let gone = self.gone.clone();
            async move {
                if ack {
                    gone.notified().await;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Ok(())
            }
        }

        async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
            let message = self.from_client.recv().await;
            if message.is_none() {
                self.gone.notify_one();
            }
            message
        }

        async fn close(&mut self) -> Result<(), Self::Error> {
            Ok(())
        }
    }

    /// A 2026-07-28 client that opens a listen and goes before rmcp learns
    /// that the acknowledgement was written: the server still ends at once
    /// (it held its end for rmcp's 5 s drain, with the listen waiting for
    /// that acknowledgement, and CI saw it).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_client_gone_before_its_listen_was_acknowledged_ends_the_server_at_once() {
        let host = McpHost::new(
            Airlock::new(airlock_host::Config {
                bundled_tools: false,
                ..airlock_host::Config::default()
            })
            .await
            .unwrap(),
        );
        let (client, from_client) = tokio::sync::mpsc::unbounded_channel();
        let transport = Ordered::new(AckWrittenLate {
            from_client,
            gone: Arc::default(),
        });
        let listen = serde_json::json!({"jsonrpc": "2.0", "id": 1,
            "method": "subscriptions/listen", "params": {
                "notifications": {"toolsListChanged": true},
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {},
                    "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}}}});
        client
            .send(serde_json::from_value(listen).unwrap())
            .unwrap();
        let session = host.session();
        let served = tokio::spawn(async move {
            let running = session.serve(transport).await.unwrap();
            running.waiting().await.unwrap()
        });
        tokio::time::sleep(Duration::from_millis(200)).await;
        let ended = std::time::Instant::now();
        drop(client);
        tokio::time::timeout(Duration::from_secs(10), served)
            .await
            .expect("the server ends")
            .unwrap();
        assert!(
            ended.elapsed() < Duration::from_secs(2),
            "the server took {:?} to end",
            ended.elapsed()
        );
    }

    /// An exclusive call sent right after another starts only once that
    /// one's reply is written, however long the writing takes: so its own
    /// reply never goes out first (a `sleep`'s reply took 300 ms to write
    /// here, and the `write` behind it waited for it).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_exclusive_call_starts_once_the_reply_before_it_is_written() {
        use airlock_host::testing::setup;
        let s = setup(&[]);
        let mut config = s.config.clone();
        config.bundled_tools = true;
        let ws = config.workspace.clone().unwrap();
        let host = McpHost::new(Airlock::open(config).await.unwrap());
        let (client, from_client) = tokio::sync::mpsc::unbounded_channel();
        let written = Arc::new(Mutex::new(Vec::new()));
        let transport = Ordered::new(SlowFirstReply {
            from_client,
            written: written.clone(),
        });
        let session = host.session();
        tokio::spawn(async move {
            if let Ok(running) = session.serve(transport).await {
                let _ = running.waiting().await;
            }
        });
        let send = |message: Value| {
            client
                .send(serde_json::from_value(message).unwrap())
                .unwrap()
        };
        send(
            serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"}}}),
        );
        send(serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        let call = |id: u32, name: &str, arguments: Value| {
            serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": name, "arguments": arguments}})
        };
        let target = ws.join("b.txt");
        let write = |id| {
            call(
                id,
                "write",
                serde_json::json!({"file_path": target, "content": "x"}),
            )
        };
        let replies = async |n: usize| {
            tokio::time::timeout(Duration::from_secs(120), async {
                loop {
                    if lock(&written).len() == n {
                        return lock(&written).clone();
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            })
            .await
            .expect("every reply")
        };
        // Both tools compiled first (their compiles would hide the order).
        send(call(10, "sleep", serde_json::json!({"ms": 0})));
        send(write(11));
        replies(3).await;
        send(call(1, "sleep", serde_json::json!({"ms": 0})));
        send(write(2));
        let replies = replies(5).await;
        let [.., (first, _, sleep_written), (second, write_handed, _)] = &replies[..] else {
            unreachable!()
        };
        assert_eq!(
            (first, second),
            (&serde_json::json!(1), &serde_json::json!(2))
        );
        assert!(
            write_handed >= sleep_written,
            "the write was answered {:?} before the sleep's reply was written",
            *sleep_written - *write_handed
        );
        assert_eq!(std::fs::read_to_string(target).unwrap(), "x");
    }

    /// What a call holds is let go of once the call is over (its reply
    /// written, or the client cancelled it), at once if it already is, and
    /// when the client reuses its id.
    #[tokio::test]
    async fn a_call_holds_its_place_only_until_it_is_over() {
        let replies = Replies::<Arc<()>>::default();
        let held = Arc::new(());
        let id = RequestId::Number(1);
        replies.open(id.clone());
        replies.hold(&id, held.clone());
        assert_eq!(
            Arc::strong_count(&held),
            2,
            "kept until the reply is written"
        );
        drop(replies.close(&id));
        assert_eq!(Arc::strong_count(&held), 1, "let go of once it is");
        replies.hold(&id, held.clone());
        assert_eq!(
            Arc::strong_count(&held),
            1,
            "a call that is over holds nothing"
        );
        replies.open(id.clone());
        replies.hold(&id, held.clone());
        replies.open(id.clone());
        assert_eq!(
            Arc::strong_count(&held),
            1,
            "a reused id lets go of the first"
        );

        let (client, from_client) = tokio::sync::mpsc::unbounded_channel();
        let mut ordered = Ordered::new(SlowFirstReply {
            from_client,
            written: Arc::default(),
        });
        let message = |m| serde_json::from_value::<ClientJsonRpcMessage>(m).unwrap();
        client
            .send(message(serde_json::json!({"jsonrpc": "2.0", "id": 7,
                "method": "tools/call", "params": {"name": "sleep"}})))
            .unwrap();
        client
            .send(message(serde_json::json!({"jsonrpc": "2.0",
                "method": "notifications/cancelled", "params": {"requestId": 7}})))
            .unwrap();
        ordered.receive().await.unwrap();
        let call = RequestId::Number(7);
        assert!(lock(&ordered.replies.0).contains_key(&call), "a call opens");
        ordered.receive().await.unwrap();
        assert!(lock(&ordered.replies.0).is_empty(), "its cancel closes it");
    }
}
