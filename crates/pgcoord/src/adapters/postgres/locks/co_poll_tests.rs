//! Who polls a [`CoPolled`] work, and that nothing is lost when a helper
//! goes away.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use tokio::sync::{mpsc, oneshot, Notify};
use tokio::task::Id;

use super::CoPolled;

/// A request to the test work: answered with the id of the task that ran
/// the work, once `gate` (if any) lets it.
struct Ask {
    gate: Option<Arc<Notify>>,
    reply: oneshot::Sender<Option<Id>>,
}

/// Answers asks until the channel closes.
async fn work(mut rx: mpsc::UnboundedReceiver<Ask>) {
    while let Some(ask) = rx.recv().await {
        if let Some(gate) = ask.gate {
            gate.notified().await;
        }
        let _ = ask.reply.send(tokio::task::try_id());
    }
}

/// Starts the work in its own task and lets it install itself.
async fn started() -> (Arc<CoPolled>, mpsc::UnboundedSender<Ask>, Id) {
    let co = CoPolled::new();
    let (tx, rx) = mpsc::unbounded_channel();
    let own = tokio::spawn(co.run(work(rx)));
    tokio::task::yield_now().await;
    let own_id = own.id();
    (co, tx, own_id)
}

/// Polls `f` once, as a caller's task would before being woken.
async fn poll_once<F: Future + Unpin>(f: &mut F) -> Poll<F::Output> {
    std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut *f).poll(cx))).await
}

fn ask(
    tx: &mpsc::UnboundedSender<Ask>,
    gate: Option<Arc<Notify>>,
) -> oneshot::Receiver<Option<Id>> {
    let (reply, rx) = oneshot::channel();
    tx.send(Ask { gate, reply }).expect("the work is running");
    rx
}

#[tokio::test(flavor = "current_thread")]
async fn a_waiting_caller_runs_the_work_in_its_own_task() {
    let (co, tx, own_id) = started().await;
    let caller = tokio::spawn(async move {
        let rx = ask(&tx, None);
        let answered_in = co.clone().help(rx).await.expect("answered");
        (answered_in, tokio::task::id())
    });
    let (answered_in, caller_id) = caller.await.expect("caller ran");
    assert_eq!(answered_in, Some(caller_id));
    assert_ne!(answered_in, Some(own_id));
}

/// A waker that counts its wake-ups.
struct Counting(AtomicUsize);

impl Wake for Counting {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// tokio reschedules a task woken during its own poll as one that yielded
/// (and wakes another worker to take it): an answer the helper produced
/// itself must not wake it.
#[tokio::test(flavor = "current_thread")]
async fn a_helper_answered_by_its_own_polling_is_not_woken_by_the_answer() {
    let (co, tx, _) = started().await;
    let gate = Arc::new(Notify::new());
    let mut rx = ask(&tx, Some(gate.clone()));
    let wakes = Arc::new(Counting(AtomicUsize::new(0)));
    let waker = Waker::from(wakes.clone());
    let mut cx = Context::from_waker(&waker);
    let mut helping = co.clone().help(&mut rx);
    // The work takes the ask and waits at the gate; the reply waits too.
    assert!(Pin::new(&mut helping).poll(&mut cx).is_pending());
    // Opening the gate wakes the work, that is its helper: once.
    gate.notify_one();
    assert_eq!(wakes.0.load(Ordering::SeqCst), 1);
    // The helper polls the work, which answers it.
    assert!(Pin::new(&mut helping).poll(&mut cx).is_ready());
    assert_eq!(wakes.0.load(Ordering::SeqCst), 1, "its own answer woke it");
}

#[tokio::test(flavor = "current_thread")]
async fn a_helper_dropped_mid_request_leaves_it_to_the_works_task() {
    let (co, tx, own_id) = started().await;
    let gate = Arc::new(Notify::new());
    let mut rx = ask(&tx, Some(gate.clone()));
    {
        // One poll: the work takes the request and waits at the gate.
        let mut helping = co.clone().help(&mut rx);
        assert!(poll_once(&mut helping).await.is_pending());
    }
    gate.notify_one();
    let answered_in = rx.await.expect("answered after the helper left");
    assert_eq!(answered_in, Some(own_id));
}

#[tokio::test(flavor = "current_thread")]
async fn a_helper_woken_and_dropped_before_polling_hands_the_wake_up_on() {
    let (co, tx, own_id) = started().await;
    let gate = Arc::new(Notify::new());
    let mut rx = ask(&tx, Some(gate.clone()));
    let mut helping = co.clone().help(&mut rx);
    assert!(poll_once(&mut helping).await.is_pending());
    // The wake-up goes to the helper, which then leaves without polling.
    gate.notify_one();
    drop(helping);
    let answered_in = rx.await.expect("answered after the helper left");
    assert_eq!(answered_in, Some(own_id));
}

#[test]
fn a_caller_on_another_runtime_does_not_poll_the_work() {
    let home = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .build()
        .expect("runtime");
    let (co, tx, own_id) = home.block_on(started());
    let elsewhere = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let answered_in = elsewhere.block_on(async {
        let rx = ask(&tx, None);
        co.clone().help(rx).await.expect("answered")
    });
    assert_eq!(answered_in, Some(own_id));
}

#[tokio::test(flavor = "current_thread")]
async fn dropping_the_works_task_drops_the_work() {
    let co = CoPolled::new();
    let (tx, rx) = mpsc::unbounded_channel();
    let own = tokio::spawn(co.run(work(rx)));
    tokio::task::yield_now().await;
    let pending = ask(&tx, Some(Arc::new(Notify::new())));
    own.abort();
    let _ = own.await;
    // The work (and the request it held) is gone, not kept by `co`.
    assert!(pending.await.is_err());
    assert!(tx.is_closed());
}
