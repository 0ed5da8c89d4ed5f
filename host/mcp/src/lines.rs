//! The stdio transport's writer: one task owns the output and writes every
//! line queued since its last write in one go, so replies that finish
//! together leave together (one system call, and one wake-up of the
//! client, for many), in the order they were queued, whether by the
//! transport or through a [`LineSender`] (a call answered outside rmcp's
//! serve loop). It knows nothing of MCP: it writes bytes.

use std::io;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

/// The most bytes gathered into one write (a longer line is written whole).
const MOST_AT_ONCE: usize = 1 << 20;

/// A line, and who waits for it to be written.
type Queued = (Vec<u8>, oneshot::Sender<io::Result<()>>);

/// Writes queued lines in order, many per write.
pub(crate) struct LineWriter {
    queue: Option<mpsc::UnboundedSender<Queued>>,
    /// Dropped to close the output while [`LineSender`]s are still held.
    closing: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl LineWriter {
    /// Starts the task that owns `out`.
    pub(crate) fn new<W: AsyncWrite + Send + Unpin + 'static>(out: W) -> LineWriter {
        let (queue, lines) = mpsc::unbounded_channel();
        let (closing, closed) = oneshot::channel();
        LineWriter {
            queue: Some(queue),
            closing: Some(closing),
            task: Some(tokio::spawn(write_out(out, lines, closed))),
        }
    }

    /// Queues `line` now (so lines leave in the order this is called) and
    /// returns what waits for it to be written.
    pub(crate) fn send(
        &self,
        line: Vec<u8>,
    ) -> impl Future<Output = io::Result<()>> + Send + 'static {
        send(self.queue.as_ref(), line)
    }

    /// What queues lines from elsewhere, in the same order as
    /// [`LineWriter::send`]'s (while the writer is open).
    pub(crate) fn sender(&self) -> LineSender {
        LineSender(self.queue.clone())
    }
}

/// Queues lines for a [`LineWriter`]'s task.
#[derive(Clone)]
pub(crate) struct LineSender(Option<mpsc::UnboundedSender<Queued>>);

impl LineSender {
    /// As [`LineWriter::send`].
    pub(crate) fn send(
        &self,
        line: Vec<u8>,
    ) -> impl Future<Output = io::Result<()>> + Send + 'static {
        send(self.0.as_ref(), line)
    }
}

fn send(
    queue: Option<&mpsc::UnboundedSender<Queued>>,
    line: Vec<u8>,
) -> impl Future<Output = io::Result<()>> + Send + 'static {
    let (done, written) = oneshot::channel();
    let queued = queue.is_some_and(|queue| queue.send((line, done)).is_ok());
    async move {
        if !queued {
            return Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "the output is closed",
            ));
        }
        written.await.unwrap_or_else(|_| {
            Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "the output's writer stopped",
            ))
        })
    }
}

impl LineWriter {
    /// Writes what is queued, then closes the output (a [`LineSender`]
    /// that queues a line after this is told the output is closed).
    pub(crate) async fn close(&mut self) -> io::Result<()> {
        self.queue.take();
        self.closing.take();
        match self.task.take() {
            Some(task) => task.await.map_err(io::Error::other),
            None => Ok(()),
        }
    }
}

async fn write_out<W: AsyncWrite + Unpin>(
    mut out: W,
    mut lines: mpsc::UnboundedReceiver<Queued>,
    mut closing: oneshot::Receiver<()>,
) {
    let mut batch = Vec::new();
    let mut waiting = Vec::new();
    let mut closed = false;
    loop {
        let (line, done) = tokio::select! {
            queued = lines.recv() => match queued {
                Some(queued) => queued,
                None => break,
            },
            // The writer closed or dropped: what is queued is still written.
            _ = &mut closing, if !closed => {
                lines.close();
                closed = true;
                continue;
            }
        };
        batch.extend_from_slice(&line);
        waiting.push(done);
        while batch.len() < MOST_AT_ONCE
            && let Ok((line, done)) = lines.try_recv()
        {
            batch.extend_from_slice(&line);
            waiting.push(done);
        }
        let written = async {
            out.write_all(&batch).await?;
            out.flush().await
        }
        .await;
        batch.clear();
        for done in waiting.drain(..) {
            let _ = done.send(match &written {
                Ok(()) => Ok(()),
                Err(e) => Err(io::Error::new(e.kind(), e.to_string())),
            });
        }
        if written.is_err() {
            return;
        }
    }
    let _ = out.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn lines_leave_in_order_and_close_writes_what_was_queued() {
        let (out, mut read) = tokio::io::duplex(1 << 16);
        let mut writer = LineWriter::new(out);
        let sent: Vec<_> = (0..100)
            .map(|i| writer.send(format!("line {i}\n").into_bytes()))
            .collect();
        for sent in sent {
            sent.await.unwrap();
        }
        writer.close().await.unwrap();
        let mut all = String::new();
        read.read_to_string(&mut all).await.unwrap();
        let expected: String = (0..100).map(|i| format!("line {i}\n")).collect();
        assert_eq!(all, expected);
        assert!(writer.send(b"late\n".to_vec()).await.is_err());
    }

    #[tokio::test]
    async fn a_senders_lines_keep_their_place_and_it_does_not_hold_the_output_open() {
        let (out, mut read) = tokio::io::duplex(1 << 16);
        let mut writer = LineWriter::new(out);
        let sender = writer.sender();
        let first = writer.send(b"one\n".to_vec());
        let second = sender.send(b"two\n".to_vec());
        let third = writer.send(b"three\n".to_vec());
        first.await.unwrap();
        second.await.unwrap();
        third.await.unwrap();
        let closed = tokio::time::timeout(Duration::from_secs(10), writer.close()).await;
        closed.expect("closed while a sender is held").unwrap();
        let mut all = String::new();
        read.read_to_string(&mut all).await.unwrap();
        assert_eq!(all, "one\ntwo\nthree\n");
        assert!(sender.send(b"late\n".to_vec()).await.is_err());
    }

    #[tokio::test]
    async fn a_failed_write_fails_what_waited_for_it_and_what_comes_after() {
        let (out, read) = tokio::io::duplex(16);
        drop(read);
        let writer = LineWriter::new(out);
        assert!(writer.send(b"nobody reads this\n".to_vec()).await.is_err());
        assert!(writer.send(b"nor this\n".to_vec()).await.is_err());
    }
}
