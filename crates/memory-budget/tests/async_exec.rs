//! The async path under different executors: a park-based `block_on` written here,
//! `pollster::block_on`, and a single-thread run queue with many tasks at once.

mod common;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;
use std::time::Duration;

use common::seeded_rng;
use memory_budget::{Budget, BudgetError, Category, Priority, Reservation};
use rand::RngExt;

/// Executor 1: poll, park until woken, repeat.
fn park_block_on<F: Future>(fut: F) -> F::Output {
    struct Unpark(Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut fut = std::pin::pin!(fut);
    loop {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park();
    }
}

/// Executor 3: many tasks on one thread; a task is polled again only after its waker fired.
type Task = (Pin<Box<dyn Future<Output = ()>>>, Arc<TaskWake>);

struct RunQueue {
    tasks: Vec<Task>,
}

struct TaskWake {
    ready: AtomicBool,
    thread: Thread,
}

impl Wake for TaskWake {
    fn wake(self: Arc<Self>) {
        self.ready.store(true, Ordering::SeqCst);
        self.thread.unpark();
    }
}

impl RunQueue {
    fn new() -> RunQueue {
        RunQueue { tasks: Vec::new() }
    }

    fn spawn(&mut self, f: impl Future<Output = ()> + 'static) {
        let w = Arc::new(TaskWake {
            ready: AtomicBool::new(true),
            thread: std::thread::current(),
        });
        self.tasks.push((Box::pin(f), w));
    }

    fn run(mut self) {
        while !self.tasks.is_empty() {
            let mut progressed = false;
            let mut i = 0;
            while i < self.tasks.len() {
                if self.tasks[i].1.ready.swap(false, Ordering::SeqCst) {
                    progressed = true;
                    let waker = Waker::from(Arc::clone(&self.tasks[i].1));
                    if self.tasks[i]
                        .0
                        .as_mut()
                        .poll(&mut Context::from_waker(&waker))
                        .is_ready()
                    {
                        drop(self.tasks.swap_remove(i));
                        continue;
                    }
                }
                i += 1;
            }
            if !progressed {
                std::thread::park_timeout(Duration::from_millis(100));
            }
        }
    }
}

/// Yields to the executor once (so a task holds its reservation across polls).
struct YieldNow(bool);
impl Future for YieldNow {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            Poll::Ready(())
        } else {
            self.0 = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

type BlockOn = fn(
    Pin<Box<dyn Future<Output = Result<Reservation, BudgetError>> + Send>>,
) -> Result<Reservation, BudgetError>;

fn executors() -> [(&'static str, BlockOn); 2] {
    [
        ("park_block_on", |f| park_block_on(f)),
        ("pollster", |f| pollster::block_on(f)),
    ]
}

#[test]
fn waiter_is_woken_by_a_release_on_another_thread() {
    let mut rng = seeded_rng("waiter_is_woken_by_a_release_on_another_thread");
    for (name, block_on) in executors() {
        let total: u64 = rng.random_range(2..10_000);
        let want = rng.random_range(1..=total);
        let b = Budget::fixed(total);
        let hold = b.try_reserve(total, Category::Other, "hold").expect("fits");
        let b2 = b.clone();
        let t = std::thread::spawn(move || {
            block_on(Box::pin(b2.reserve_async(want, Category::Srs, "a")))
        });
        while b.snapshot().n_waiting < 1 {
            std::thread::yield_now();
        }
        drop(hold);
        let r = t
            .join()
            .expect("no panic")
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            (r.bytes(), r.category(), r.label()),
            (want, Category::Srs, "a"),
            "{name}"
        );
        assert_eq!(b.used_bytes(), want, "{name}");
    }
}

#[test]
fn two_executors_share_one_tiny_budget() {
    let mut rng = seeded_rng("two_executors_share_one_tiny_budget");
    let total: u64 = rng.random_range(8..128);
    let b = Budget::fixed(total);
    let seeds: Vec<u64> = (0..4).map(|_| rng.random()).collect();
    let threads: Vec<_> = seeds
        .into_iter()
        .enumerate()
        .map(|(i, seed)| {
            let b = b.clone();
            let (name, block_on) = executors()[i % 2];
            std::thread::spawn(move || {
                use rand::SeedableRng;
                let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
                for _ in 0..300 {
                    let n = rng.random_range(1..=total);
                    let pr = Priority::new(rng.random_range(0..=255));
                    let r = block_on(Box::pin(
                        b.request(n, Category::Transient)
                            .priority(pr)
                            .reserve_async(),
                    ))
                    .unwrap_or_else(|e| panic!("{name}: {e}"));
                    assert_eq!(r.bytes(), n);
                    if rng.random_bool(0.3) {
                        std::thread::yield_now();
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("no panic");
    }
    assert_eq!(b.used_bytes(), 0);
    assert_eq!(b.snapshot().n_waiting, 0);
}

#[test]
fn run_queue_admits_in_fifo_order() {
    let mut rng = seeded_rng("run_queue_admits_in_fifo_order");
    let n_tasks: usize = rng.random_range(5..50);
    let total: u64 = rng.random_range(1..1000);
    let b = Budget::fixed(total);
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut q = RunQueue::new();
    for i in 0..n_tasks {
        let b = b.clone();
        let order = Arc::clone(&order);
        // Every task wants the whole budget, so they must go one at a time, in order.
        q.spawn(async move {
            let r = b
                .reserve_async(total, Category::Other, format!("t{i}"))
                .await
                .expect("admitted");
            order.lock().unwrap().push(i);
            YieldNow(false).await; // hold across a poll
            YieldNow(false).await;
            drop(r);
        });
    }
    q.run();
    assert_eq!(*order.lock().unwrap(), (0..n_tasks).collect::<Vec<_>>());
    assert_eq!(b.used_bytes(), 0);
}

#[test]
fn run_queue_many_random_tasks() {
    let mut rng = seeded_rng("run_queue_many_random_tasks");
    let total: u64 = rng.random_range(4..64);
    let b = Budget::fixed(total);
    let mut q = RunQueue::new();
    let done = Arc::new(Mutex::new(0usize));
    let n_tasks = 200;
    for _ in 0..n_tasks {
        let b = b.clone();
        let n = rng.random_range(1..=total);
        let hold_polls = rng.random_range(0..4);
        let done = Arc::clone(&done);
        q.spawn(async move {
            let r = b
                .reserve_async(n, Category::Other, "t")
                .await
                .expect("admitted");
            assert!(b.used_bytes() <= total);
            for _ in 0..hold_polls {
                YieldNow(false).await;
            }
            drop(r);
            *done.lock().unwrap() += 1;
        });
    }
    q.run();
    assert_eq!(*done.lock().unwrap(), n_tasks);
    assert_eq!(b.used_bytes(), 0);
}
