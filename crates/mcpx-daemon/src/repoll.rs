//! Polling a connection again at once when it wakes itself while being polled.
//!
//! A hyper HTTP/1.1 connection runs its request handler inside its own task, and hands
//! the handler the request body through a channel whose sending side is the
//! connection itself. Reading that body (hyper 1.12), or dropping it (hyper 1.11),
//! wakes the connection's task while the task is being polled. tokio treats a task
//! woken during its own poll as a yield: it puts the task at the back of the run
//! queue and wakes an idle worker thread to take it, so every request with a body
//! costs a `futex` wake of the other worker, a context switch and a spurious poll
//! (`docs/profile.md`, "The connection that wakes itself").
//!
//! [`Repoll`] wraps such a future. It polls the future with a waker of its own: a wake
//! that arrives while the future is being polled only marks that poll, and the future
//! is polled again before `Repoll::poll` returns; a wake at any other time is passed
//! to the task's waker as usual. At most [`REPOLLS`] polls happen in a row, so a
//! future that keeps waking itself (tokio's cooperative budget spent, or a fairness
//! yield) still goes back to the scheduler.
//!
//! The control socket's connections use it: most carry one request (the CLI opens a
//! connection per request), so the wake is only waste there (measured when each
//! carried one, 64 callers: 6% more calls per second, 4 µs less of the daemon's CPU
//! per call). The TCP `/mcp` connections do not: they are kept alive, and the
//! yield lets the next request arrive before the connection is polled again (16
//! connections served 2–3% fewer calls per second with it).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::task::{Context, Poll, Wake, Waker};

use futures_util::task::AtomicWaker;

/// How many polls [`Repoll`] makes in a row before it hands a self-wake to the
/// scheduler.
pub const REPOLLS: usize = 4;

/// Not being polled: a wake goes to the task.
const IDLE: u8 = 0;
/// Being polled, not woken yet.
const POLLING: u8 = 1;
/// Woken while being polled: poll again.
const WOKEN: u8 = 2;

/// A future polled again at once when it wakes itself during a poll (the module's
/// doc says why). Its output is the inner future's.
pub struct Repoll<F> {
    inner: Pin<Box<F>>,
    state: Arc<State>,
    /// The waker the inner future sees, made once from `state`.
    waker: Waker,
}

/// What the inner future's waker shares with [`Repoll`].
struct State {
    /// [`IDLE`], [`POLLING`] or [`WOKEN`].
    phase: AtomicU8,
    /// The waker of the task that last polled the [`Repoll`] (taken by a wake, and
    /// registered again by the next poll).
    task: AtomicWaker,
}

impl<F: Future> Repoll<F> {
    /// Wraps `inner`.
    pub fn new(inner: F) -> Repoll<F> {
        let state = Arc::new(State { phase: AtomicU8::new(IDLE), task: AtomicWaker::new() });
        let waker = Waker::from(state.clone());
        Repoll { inner: Box::pin(inner), state, waker }
    }
}

impl<F: Future> Future for Repoll<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.state.task.register(cx.waker());
        let this = &mut *self;
        let mut inner_cx = Context::from_waker(&this.waker);
        for _ in 0..REPOLLS {
            this.state.phase.store(POLLING, Ordering::SeqCst);
            let polled = this.inner.as_mut().poll(&mut inner_cx);
            let phase = this.state.phase.swap(IDLE, Ordering::SeqCst);
            if polled.is_ready() || phase != WOKEN {
                return polled;
            }
        }
        // Woken during every one of those polls: let the scheduler decide, as it would
        // without this wrapper.
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

impl Wake for State {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // During a poll, mark it: `Repoll::poll` polls again before it returns. The
        // swap there and this exchange are one atomic each, so a wake lands either
        // before the poll ends (and is seen there) or after (and goes to the task).
        match self.phase.compare_exchange(POLLING, WOKEN, Ordering::SeqCst, Ordering::SeqCst) {
            Ok(_) | Err(WOKEN) => {}
            Err(_) => self.task.wake(),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // Reason: a failed unwrap is a failed test.

    use super::*;
    use std::sync::Mutex;
    use std::sync::atomic::AtomicUsize;

    /// A task waker that counts its wakes.
    #[derive(Default)]
    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn task() -> (Arc<Count>, Waker) {
        let count = Arc::new(Count::default());
        let waker = Waker::from(count.clone());
        (count, waker)
    }

    #[test]
    fn a_future_that_wakes_itself_is_polled_again_without_waking_the_task() {
        let mut polls = 0;
        let future = std::future::poll_fn(|cx| {
            polls += 1;
            if polls == 1 {
                cx.waker().wake_by_ref();
                Poll::Pending
            } else {
                Poll::Ready(polls)
            }
        });
        let (count, waker) = task();
        let mut repoll = std::pin::pin!(Repoll::new(future));
        assert_eq!(repoll.as_mut().poll(&mut Context::from_waker(&waker)), Poll::Ready(2));
        assert_eq!(count.0.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn a_future_that_always_wakes_itself_goes_back_to_the_scheduler() {
        let polls = std::cell::Cell::new(0);
        let future = std::future::poll_fn(|cx| {
            polls.set(polls.get() + 1);
            cx.waker().wake_by_ref();
            Poll::<()>::Pending
        });
        let (count, waker) = task();
        let mut repoll = std::pin::pin!(Repoll::new(future));
        assert!(repoll.as_mut().poll(&mut Context::from_waker(&waker)).is_pending());
        assert_eq!(count.0.load(Ordering::SeqCst), 1, "the task is woken once, to be polled again later");
        assert_eq!(polls.get(), REPOLLS);
    }

    /// A future that never ends and keeps the waker of its last poll.
    fn keeping_its_waker() -> (Arc<Mutex<Option<Waker>>>, impl Future<Output = ()>) {
        let kept: Arc<Mutex<Option<Waker>>> = Arc::default();
        let keep = kept.clone();
        let future = std::future::poll_fn(move |cx| {
            *keep.lock().unwrap() = Some(cx.waker().clone());
            Poll::<()>::Pending
        });
        (kept, future)
    }

    #[test]
    fn a_wake_after_the_poll_reaches_the_task() {
        let (kept, future) = keeping_its_waker();
        let (count, waker) = task();
        let mut repoll = std::pin::pin!(Repoll::new(future));
        assert!(repoll.as_mut().poll(&mut Context::from_waker(&waker)).is_pending());
        assert_eq!(count.0.load(Ordering::SeqCst), 0);
        let stored = kept.lock().unwrap().take().unwrap();
        std::thread::spawn(move || stored.wake()).join().unwrap();
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn the_newest_task_waker_is_the_one_woken() {
        let (kept, future) = keeping_its_waker();
        let (first, first_waker) = task();
        let (second, second_waker) = task();
        let mut repoll = std::pin::pin!(Repoll::new(future));
        assert!(repoll.as_mut().poll(&mut Context::from_waker(&first_waker)).is_pending());
        assert!(repoll.as_mut().poll(&mut Context::from_waker(&second_waker)).is_pending());
        kept.lock().unwrap().take().unwrap().wake();
        assert_eq!((first.0.load(Ordering::SeqCst), second.0.load(Ordering::SeqCst)), (0, 1));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn wakes_from_other_tasks_while_it_runs_are_never_lost() {
        // A channel fed by another task: every message must arrive, whichever way each
        // wake lands (during a poll or between polls).
        let (tx, mut rx) = tokio::sync::mpsc::channel::<u32>(1);
        let sender = tokio::spawn(async move {
            for i in 0..10_000 {
                tx.send(i).await.unwrap();
            }
        });
        let received = tokio::spawn(Repoll::new(async move {
            let mut n = 0;
            while let Some(i) = rx.recv().await {
                assert_eq!(i, n);
                n += 1;
            }
            n
        }));
        sender.await.unwrap();
        let n = tokio::time::timeout(std::time::Duration::from_secs(20), received).await.unwrap().unwrap();
        assert_eq!(n, 10_000);
    }
}
