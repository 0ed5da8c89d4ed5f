//! [`CappedPipe`]: a guest's stdout or stderr, kept in memory up to a cap.
//! Writing past the cap ends the call: the write traps the guest (a
//! stream error it could ignore would let the call go on and succeed), and
//! the pipe remembers it overflowed, so the engine reports the distinct
//! `output_limit` class instead of a generic trap.

use bytes::Bytes;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use tokio::io::AsyncWrite;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi_io::poll::Pollable;
use wasmtime_wasi_io::streams::{OutputStream, StreamError};

#[derive(Debug, Default)]
struct Buffer {
    data: Vec<u8>,
    overflowed: bool,
}

/// An in-memory output stream with a hard cap.
#[derive(Clone, Debug)]
pub(crate) struct CappedPipe {
    cap: usize,
    buffer: Arc<Mutex<Buffer>>,
}

impl CappedPipe {
    pub(crate) fn new(cap: usize) -> Self {
        CappedPipe {
            cap,
            buffer: Arc::default(),
        }
    }

    /// Whether the guest tried to write past the cap.
    pub(crate) fn overflowed(&self) -> bool {
        self.lock().overflowed
    }

    /// The last `max` bytes written, as (lossy) text.
    pub(crate) fn tail(&self, max: usize) -> String {
        let buffer = self.lock();
        let start = buffer.data.len().saturating_sub(max);
        String::from_utf8_lossy(&buffer.data[start..]).into_owned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Buffer> {
        // The lock is never held across a panic point.
        self.buffer.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Appends what fits; reports whether everything did.
    fn append(&self, bytes: &[u8]) -> bool {
        let mut buffer = self.lock();
        let room = self.cap.saturating_sub(buffer.data.len());
        let take = bytes.len().min(room);
        buffer.data.extend_from_slice(&bytes[..take]);
        if take < bytes.len() {
            buffer.overflowed = true;
            false
        } else {
            true
        }
    }

    fn room(&self) -> usize {
        let buffer = self.lock();
        self.cap.saturating_sub(buffer.data.len())
    }
}

impl IsTerminal for CappedPipe {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for CappedPipe {
    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }

    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }
}

#[async_trait::async_trait]
impl OutputStream for CappedPipe {
    fn write(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        if self.append(&bytes) {
            Ok(())
        } else {
            Err(StreamError::Trap(wasmtime::format_err!(
                "the tool wrote more than {} bytes of output",
                self.cap
            )))
        }
    }

    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }

    fn check_write(&mut self) -> Result<usize, StreamError> {
        match self.room() {
            0 => {
                self.lock().overflowed = true;
                Err(StreamError::Trap(wasmtime::format_err!(
                    "the tool wrote more than {} bytes of output",
                    self.cap
                )))
            }
            room => Ok(room),
        }
    }
}

#[async_trait::async_trait]
impl Pollable for CappedPipe {
    async fn ready(&mut self) {}
}

impl AsyncWrite for CappedPipe {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let room = self.room();
        if room == 0 && !buf.is_empty() {
            self.lock().overflowed = true;
            return Poll::Ready(Err(std::io::Error::other("output limit reached")));
        }
        let take = buf.len().min(room);
        self.append(&buf[..take]);
        Poll::Ready(Ok(take))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_output_up_to_the_cap_then_flags_overflow() {
        let mut pipe = CappedPipe::new(8);
        assert_eq!(pipe.check_write().unwrap(), 8);
        pipe.write(Bytes::from_static(b"hello")).unwrap();
        assert!(!pipe.overflowed());
        assert!(matches!(
            pipe.write(Bytes::from_static(b"world")),
            Err(StreamError::Trap(_))
        ));
        assert!(pipe.overflowed());
        assert_eq!(pipe.tail(100), "hellowor");
        assert_eq!(pipe.tail(3), "wor");
        assert!(
            matches!(pipe.check_write(), Err(StreamError::Trap(_))),
            "a full pipe traps the guest rather than report a closed stream it could ignore"
        );
    }
}
