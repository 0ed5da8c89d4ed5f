//! stdin and stdout as the stdio transport reads and writes them, without
//! Tokio's blocking thread pool where the descriptors allow it: a socket
//! (what Node's `child_process` gives a child for both, so for Claude
//! Code, the Inspector and the TypeScript SDK) is read and written with
//! `MSG_DONTWAIT`, which leaves the descriptor's own flags alone; a pipe
//! is reopened through `/proc/self/fd` with `O_NONBLOCK` on its own open
//! file description. Anything else (a terminal, a file) goes through
//! Tokio's stdin and stdout, which read and write on a blocking thread.
//! Each side is chosen on its own. Linux only (`/proc`, `MSG_NOSIGNAL`);
//! elsewhere rmcp's `stdio_pipes` serves. It knows nothing of MCP.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::unix::pipe;

/// The transport's input.
pub(crate) enum Input {
    Socket(Socket),
    Pipe(pipe::Receiver),
    Std(tokio::io::Stdin),
}

/// The transport's output.
pub(crate) enum Output {
    Socket(Socket),
    Pipe(pipe::Sender),
    Std(tokio::io::Stdout),
}

/// stdin and stdout, each read or written the cheapest way it allows.
pub(crate) fn streams() -> (Input, Output) {
    let input = match kind(io::stdin().as_fd()) {
        Kind::Socket => Socket::new(io::stdin().as_fd(), Interest::READABLE).map(Input::Socket),
        Kind::Fifo => pipe::OpenOptions::new()
            .open_receiver("/proc/self/fd/0")
            .map(Input::Pipe),
        Kind::Other => Err(io::ErrorKind::Unsupported.into()),
    }
    .unwrap_or_else(|_| Input::Std(tokio::io::stdin()));
    let output = match kind(io::stdout().as_fd()) {
        Kind::Socket => Socket::new(io::stdout().as_fd(), Interest::WRITABLE).map(Output::Socket),
        Kind::Fifo => pipe::OpenOptions::new()
            .open_sender("/proc/self/fd/1")
            .map(Output::Pipe),
        Kind::Other => Err(io::ErrorKind::Unsupported.into()),
    }
    .unwrap_or_else(|_| Output::Std(tokio::io::stdout()));
    (input, output)
}

enum Kind {
    Socket,
    Fifo,
    Other,
}

fn kind(fd: impl AsFd) -> Kind {
    match rustix::fs::fstat(fd).map(|stat| rustix::fs::FileType::from_raw_mode(stat.st_mode)) {
        Ok(rustix::fs::FileType::Socket) => Kind::Socket,
        Ok(rustix::fs::FileType::Fifo) => Kind::Fifo,
        _ => Kind::Other,
    }
}

/// A stream socket read and written without blocking, through a duplicate
/// of the descriptor (so closing it leaves stdin or stdout open) and
/// without setting `O_NONBLOCK` on it, which every process sharing the
/// socket would see.
pub(crate) struct Socket(AsyncFd<OwnedFd>);

impl Socket {
    fn new(fd: impl AsFd, interest: Interest) -> io::Result<Socket> {
        let fd = fd.as_fd().try_clone_to_owned()?;
        // SAFETY: the `AsyncFd` owns `fd`, an open descriptor that an
        // `OwnedFd` neither changes nor closes before it is dropped.
        unsafe { AsyncFd::register_with_interest(fd, interest) }
            .map(Socket)
            .map_err(io::Error::from)
    }
}

impl AsyncRead for Socket {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            let mut ready = ready!(self.0.poll_read_ready(cx))?;
            let unfilled = buf.initialize_unfilled();
            let received = ready.try_io(|fd| {
                rustix::net::recv(fd, &mut *unfilled, rustix::net::RecvFlags::DONTWAIT)
                    .map_err(io::Error::from)
            });
            match received {
                Ok(Ok((n, _))) => {
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
                Ok(Err(e)) => return Poll::Ready(Err(e)),
                // Not ready after all: readiness was cleared, wait again.
                Err(_) => {}
            }
        }
    }
}

impl AsyncWrite for Socket {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        loop {
            let mut ready = ready!(self.0.poll_write_ready(cx))?;
            let sent = ready.try_io(|fd| {
                let flags = rustix::net::SendFlags::DONTWAIT | rustix::net::SendFlags::NOSIGNAL;
                rustix::net::send(fd, buf, flags).map_err(io::Error::from)
            });
            match sent {
                Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
                Ok(sent) => return Poll::Ready(sent),
                Err(_) => {}
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    /// Leaves the socket open, as closing stdout's other kinds does: the
    /// peer sees its end when the process exits.
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl AsyncRead for Input {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Input::Socket(s) => Pin::new(s).poll_read(cx, buf),
            Input::Pipe(p) => Pin::new(p).poll_read(cx, buf),
            Input::Std(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Output {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Output::Socket(s) => Pin::new(s).poll_write(cx, buf),
            Output::Pipe(p) => Pin::new(p).poll_write(cx, buf),
            Output::Std(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Output::Socket(s) => Pin::new(s).poll_flush(cx),
            Output::Pipe(p) => Pin::new(p).poll_flush(cx),
            Output::Std(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Output::Socket(s) => Pin::new(s).poll_shutdown(cx),
            Output::Pipe(p) => Pin::new(p).poll_shutdown(cx),
            Output::Std(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}
