//! The stdio transport's writer: one task owns the output and writes every
//! line queued since its last write in one go, so replies that finish
//! together leave together (one system call, and one wake-up of the
//! client, for many), in the order they were queued. It knows nothing of
//! MCP: it writes bytes.

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
    task: Option<JoinHandle<()>>,
}

impl LineWriter {
    /// Starts the task that owns `out`.
    pub(crate) fn new<W: AsyncWrite + Send + Unpin + 'static>(out: W) -> LineWriter {
        let (queue, lines) = mpsc::unbounded_channel();
        LineWriter {
            queue: Some(queue),
            task: Some(tokio::spawn(write_out(out, lines))),
        }
    }

    /// Queues `line` now (so lines leave in the order this is called) and
    /// returns what waits for it to be written.
    pub(crate) fn send(
        &self,
        line: Vec<u8>,
    ) -> impl Future<Output = io::Result<()>> + Send + 'static {
        let (done, written) = oneshot::channel();
        let queued = self
            .queue
            .as_ref()
            .is_some_and(|queue| queue.send((line, done)).is_ok());
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

    /// Writes what is queued, then closes the output.
    pub(crate) async fn close(&mut self) -> io::Result<()> {
        self.queue.take();
        match self.task.take() {
            Some(task) => task.await.map_err(io::Error::other),
            None => Ok(()),
        }
    }
}

async fn write_out<W: AsyncWrite + Unpin>(mut out: W, mut lines: mpsc::UnboundedReceiver<Queued>) {
    let mut batch = Vec::new();
    let mut waiting = Vec::new();
    while let Some((line, done)) = lines.recv().await {
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
    async fn a_failed_write_fails_what_waited_for_it_and_what_comes_after() {
        let (out, read) = tokio::io::duplex(16);
        drop(read);
        let writer = LineWriter::new(out);
        assert!(writer.send(b"nobody reads this\n".to_vec()).await.is_err());
        assert!(writer.send(b"nor this\n".to_vec()).await.is_err());
    }
}
