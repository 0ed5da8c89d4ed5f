//! A guest call polled again at once when it woke itself without yielding.
//!
//! With the component model's async builtins on, wasmtime runs every guest
//! call as a task of its own and hands its result to the calling future
//! through a channel, waking the calling Tokio task as the call ends, from
//! within that task's own poll. Tokio takes a task woken during its own
//! poll for one that yielded: when the task then waits for something else
//! (its reply's write, say), it is queued behind the others and another
//! worker is woken to take it, so every call crossed to the other thread.
//! [`repoll`] keeps such a wake-up from the task: one during a poll that
//! ends the future is dropped, and one during a poll that leaves it
//! pending polls it again at once. A `Pending` the epoch callback asked
//! for (a guest yielding every tick so that other tasks run) is passed on
//! as before, and so is any other after a few polls in a row, so a future
//! that keeps waking itself still yields.
//!
//! At a yield the epoch callback asked for, `leave` is asked whether the
//! guest should go on elsewhere ([`crate::offload`]): then [`repoll`]
//! ends with [`Repolled::Left`], the future not finished.

use futures::task::AtomicWaker;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll, Wake, Waker};

/// Polls in a row at most before a wake-up is passed on anyway.
const IN_A_ROW: usize = 4;

/// How [`repoll`] ended.
#[derive(Debug, PartialEq)]
pub(crate) enum Repolled<T> {
    Done(T),
    /// `leave` said so at a yield the epoch callback asked for.
    Left,
}

/// Runs `fut`, polling it again at once when it woke itself during a poll
/// that `yields` (the count of yields the epoch callback asked for) did not
/// move in, until it is done or `leave` says so at such a yield.
pub(crate) async fn repoll<F: Future + ?Sized>(
    mut fut: Pin<&mut F>,
    yields: &AtomicU64,
    leave: impl Fn() -> bool,
) -> Repolled<F::Output> {
    let relay = Arc::new(Relay::default());
    let waker = Waker::from(relay.clone());
    std::future::poll_fn(move |cx| {
        relay.outer.register(cx.waker());
        for _ in 0..IN_A_ROW {
            let asked = yields.load(Ordering::SeqCst);
            relay.woken.store(false, Ordering::SeqCst);
            relay.polling.store(true, Ordering::SeqCst);
            let poll = fut.as_mut().poll(&mut Context::from_waker(&waker));
            relay.polling.store(false, Ordering::SeqCst);
            let woken = relay.woken.swap(false, Ordering::SeqCst);
            let yielded = yields.load(Ordering::SeqCst) != asked;
            match poll {
                Poll::Ready(out) => return Poll::Ready(Repolled::Done(out)),
                Poll::Pending if woken && !yielded => continue,
                Poll::Pending if yielded && leave() => return Poll::Ready(Repolled::Left),
                Poll::Pending => {
                    if woken {
                        cx.waker().wake_by_ref();
                    }
                    return Poll::Pending;
                }
            }
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    })
    .await
}

/// The waker `repoll` polls with: a wake-up during a poll is noted for the
/// poller; one at any other time (a timer, I/O, another thread) goes on to
/// the task's own waker.
#[derive(Default)]
struct Relay {
    outer: AtomicWaker,
    polling: AtomicBool,
    woken: AtomicBool,
}

impl Wake for Relay {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::SeqCst);
        if !self.polling.load(Ordering::SeqCst) {
            self.outer.wake();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// A waker that counts its wake-ups.
    #[derive(Default)]
    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Polls `fut` once with a counting waker: what it returned, and how
    /// often the task was woken.
    fn poll_once<F: Future>(fut: std::pin::Pin<&mut F>) -> (Poll<F::Output>, Arc<Count>) {
        let count = Arc::new(Count::default());
        let waker = Waker::from(count.clone());
        let poll = fut.poll(&mut Context::from_waker(&waker));
        (poll, count)
    }

    /// Pending `pending` times, each time waking itself first (and asking
    /// for a yield on `yields`, when given), then ready with the polls it
    /// took.
    fn self_waking(pending: usize, yields: Option<&AtomicU64>) -> impl Future<Output = usize> + '_ {
        let mut polls = 0;
        std::future::poll_fn(move |cx| {
            polls += 1;
            if polls > pending {
                return Poll::Ready(polls);
            }
            if let Some(yields) = yields {
                yields.fetch_add(1, Ordering::SeqCst);
            }
            cx.waker().wake_by_ref();
            Poll::Pending
        })
    }

    #[test]
    fn a_future_that_wakes_itself_once_is_done_in_one_poll_of_its_task() {
        let yields = AtomicU64::new(0);
        let inner = std::pin::pin!(self_waking(1, None));
        let fut = std::pin::pin!(repoll(inner, &yields, || true));
        let (poll, woken) = poll_once(fut);
        assert_eq!(poll, Poll::Ready(Repolled::Done(2)), "it did not leave");
        assert_eq!(woken.0.load(Ordering::SeqCst), 0, "its task was not woken");
    }

    #[test]
    fn a_yield_the_epoch_callback_asked_for_is_passed_on() {
        let yields = AtomicU64::new(0);
        let inner = std::pin::pin!(self_waking(1, Some(&yields)));
        let mut fut = std::pin::pin!(repoll(inner, &yields, || false));
        let (poll, woken) = poll_once(fut.as_mut());
        assert_eq!(poll, Poll::Pending, "it yielded");
        assert_eq!(
            woken.0.load(Ordering::SeqCst),
            1,
            "its task is to run again"
        );
        assert_eq!(poll_once(fut).0, Poll::Ready(Repolled::Done(2)));
    }

    #[test]
    fn at_a_yield_the_epoch_callback_asked_for_the_future_can_leave() {
        let yields = AtomicU64::new(0);
        let mut inner = std::pin::pin!(self_waking(1, Some(&yields)));
        {
            let fut = std::pin::pin!(repoll(inner.as_mut(), &yields, || true));
            let (poll, woken) = poll_once(fut);
            assert_eq!(poll, Poll::Ready(Repolled::Left));
            assert_eq!(woken.0.load(Ordering::SeqCst), 0, "its task is done");
        }
        let fut = std::pin::pin!(repoll(inner, &yields, || true));
        assert_eq!(
            poll_once(fut).0,
            Poll::Ready(Repolled::Done(2)),
            "it goes on elsewhere"
        );
    }

    #[test]
    fn a_future_that_keeps_waking_itself_still_yields() {
        let yields = AtomicU64::new(0);
        let inner = std::pin::pin!(self_waking(usize::MAX, None));
        let mut fut = std::pin::pin!(repoll(inner, &yields, || true));
        let (poll, woken) = poll_once(fut.as_mut());
        assert_eq!(poll, Poll::Pending);
        assert_eq!(woken.0.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_wake_up_after_the_poll_reaches_the_task() {
        let yields = AtomicU64::new(0);
        let (tx, rx) = futures::channel::oneshot::channel::<u8>();
        let mut rx = rx;
        let mut fut = std::pin::pin!(repoll(std::pin::Pin::new(&mut rx), &yields, || true));
        let (poll, woken) = poll_once(fut.as_mut());
        assert_eq!(poll, Poll::Pending);
        std::thread::spawn(move || tx.send(7).unwrap())
            .join()
            .unwrap();
        assert_eq!(woken.0.load(Ordering::SeqCst), 1, "the send woke the task");
        assert_eq!(poll_once(fut).0, Poll::Ready(Repolled::Done(Ok(7))));
    }
}
