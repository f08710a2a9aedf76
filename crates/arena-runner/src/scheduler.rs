//! The queue: task runs go to GPUs as GPUs come free, one task run per GPU at a time, so every
//! GPU stays busy while work is left. The pool is the runner's, shared by all its runs.

use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::sync::Arc;

use tokio::sync::{mpsc, watch, Mutex};

use crate::gpus::Gpu;

/// The runner's GPUs: a lease is a GPU taken out of the pool, returned when the task run ends.
pub struct GpuPool {
    all: Vec<Gpu>,
    free_tx: mpsc::UnboundedSender<Gpu>,
    free_rx: Mutex<mpsc::UnboundedReceiver<Gpu>>,
    /// GPU index → the task run holding it.
    busy: std::sync::Mutex<BTreeMap<u32, String>>,
}

impl GpuPool {
    pub fn new(gpus: Vec<Gpu>) -> Arc<GpuPool> {
        let (free_tx, free_rx) = mpsc::unbounded_channel();
        for g in &gpus {
            free_tx.send(g.clone()).expect("receiver is alive");
        }
        Arc::new(GpuPool {
            all: gpus,
            free_tx,
            free_rx: Mutex::new(free_rx),
            busy: Default::default(),
        })
    }

    pub fn gpus(&self) -> &[Gpu] {
        &self.all
    }

    pub fn busy_with(&self, index: u32) -> Option<String> {
        self.busy.lock().unwrap().get(&index).cloned()
    }

    /// Waits for a free GPU (waiters are served in order).
    async fn acquire(&self, holder: &str) -> Gpu {
        let gpu = self
            .free_rx
            .lock()
            .await
            .recv()
            .await
            .expect("the pool holds a sender");
        self.busy
            .lock()
            .unwrap()
            .insert(gpu.index, holder.to_string());
        gpu
    }

    fn release(&self, gpu: Gpu) {
        self.busy.lock().unwrap().remove(&gpu.index);
        let _ = self.free_tx.send(gpu);
    }
}

/// A GPU taken out of the pool, returned when dropped.
pub struct Lease {
    pool: Arc<GpuPool>,
    gpu: Option<Gpu>,
}

impl Lease {
    pub fn gpu(&self) -> &Gpu {
        self.gpu
            .as_ref()
            .expect("a lease holds its GPU until dropped")
    }

    /// Names what now holds the GPU (ListGpus shows it).
    pub fn relabel(&self, holder: &str) {
        self.pool
            .busy
            .lock()
            .unwrap()
            .insert(self.gpu().index, holder.to_string());
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(g) = self.gpu.take() {
            self.pool.release(g);
        }
    }
}

impl GpuPool {
    /// Waits for a free GPU (in line with the runs' task runs) and holds it for `holder`
    /// until the lease is dropped.
    pub async fn lease(self: &Arc<Self>, holder: &str) -> Lease {
        let gpu = self.acquire(holder).await;
        Lease {
            pool: self.clone(),
            gpu: Some(gpu),
        }
    }

    /// A free GPU now, if there is one and nobody is waiting for one.
    pub fn try_lease(self: &Arc<Self>, holder: &str) -> Option<Lease> {
        let gpu = self.free_rx.try_lock().ok()?.try_recv().ok()?;
        self.busy
            .lock()
            .unwrap()
            .insert(gpu.index, holder.to_string());
        Some(Lease {
            pool: self.clone(),
            gpu: Some(gpu),
        })
    }
}

/// Runs `exec(item, gpu)` for every item, each on a GPU of its own, as many at once as there
/// are GPUs. Stops handing out work when `cancel` turns true; returns when every started item
/// has ended.
///
/// `ready(item)` is awaited before the item waits for a GPU (the engine has its images
/// imported there): what an item needs before it can use a GPU is done without holding one,
/// and, since the queue moves on as soon as the previous item has its GPU, while the GPUs
/// work on the items before it.
pub async fn schedule<I, F, Fut, R, RFut>(
    items: Vec<I>,
    pool: Arc<GpuPool>,
    mut cancel: watch::Receiver<bool>,
    label: impl Fn(&I) -> String,
    ready: R,
    exec: F,
) where
    I: Send + 'static,
    F: Fn(I, Gpu) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
    R: Fn(&I) -> RFut,
    RFut: Future<Output = ()>,
{
    let mut queue: VecDeque<I> = items.into();
    let mut running = tokio::task::JoinSet::new();
    while let Some(item) = queue.pop_front() {
        if *cancel.borrow() {
            break;
        }
        tokio::select! {
            biased;
            _ = cancel.changed() => break,
            () = ready(&item) => {}
        }
        let holder = label(&item);
        let gpu = tokio::select! {
            biased;
            _ = cancel.changed() => break,
            g = pool.acquire(&holder) => g,
        };
        // A cancel that came with the free GPU (the last task run sent it as it ended).
        if *cancel.borrow() {
            pool.release(gpu);
            break;
        }
        let fut = exec(item, gpu.clone());
        let lease = Lease {
            pool: pool.clone(),
            gpu: Some(gpu),
        };
        running.spawn(async move {
            // Dropped however the task run ends, a panic included: the GPU goes back.
            let _lease = lease;
            fut.await;
        });
    }
    while running.join_next().await.is_some() {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// 4 fake GPUs, 24 task runs that sleep 60–180 ms: the GPUs are busy ≥ 95% of the wall
    /// time (the ideal is the sum of the sleeps over 4), and no GPU ever holds two at once.
    /// On tokio's paused clock: what is judged is the schedule, not how promptly a loaded
    /// machine wakes a sleeper.
    #[tokio::test(start_paused = true)]
    async fn keeps_every_gpu_busy() {
        use tokio::time::Instant;
        let pool = GpuPool::new(crate::gpus::parse_gpus("fake:4").unwrap());
        let (_tx, rx) = watch::channel(false);
        let spans: Arc<std::sync::Mutex<Vec<(u32, Instant, Instant)>>> = Default::default();
        // Sleeps chosen so that the total divides evenly over 4 GPUs (longest first).
        let mut items: Vec<u64> = (0..24).map(|i| 60 + (i % 3) * 60).collect();
        items.sort_by(|a, b| b.cmp(a));
        let total_ms: u64 = items.iter().sum();
        let t0 = Instant::now();
        let s = spans.clone();
        schedule(
            items,
            pool,
            rx,
            |ms| format!("{ms}"),
            |_| async {},
            move |ms, gpu| {
                let s = s.clone();
                async move {
                    let a = Instant::now();
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    s.lock().unwrap().push((gpu.index, a, Instant::now()));
                }
            },
        )
        .await;
        let wall = t0.elapsed().as_secs_f64();
        let spans = spans.lock().unwrap();
        assert_eq!(spans.len(), 24);
        let busy: f64 = spans.iter().map(|(_, a, b)| (*b - *a).as_secs_f64()).sum();
        let utilization = busy / (4.0 * wall);
        assert!(
            utilization >= 0.95,
            "GPUs busy {:.1}% of {wall:.3} s (ideal {:.3} s)",
            utilization * 100.0,
            total_ms as f64 / 4000.0
        );
        for g in 0..4 {
            let mut mine: Vec<_> = spans.iter().filter(|s| s.0 == g).collect();
            mine.sort_by_key(|s| s.1);
            for w in mine.windows(2) {
                assert!(w[0].2 <= w[1].1, "GPU {g} held two task runs at once");
            }
        }
    }

    /// What an item needs before it can use a GPU (its images) is awaited without a GPU,
    /// while the GPU works on the item before it: on one GPU, three items that each need
    /// 50 ms of preparation and 100 ms of work take 50 + 3 × 100 ms, not 3 × 150.
    #[tokio::test(start_paused = true)]
    async fn items_get_ready_without_a_gpu_while_the_gpus_work() {
        let pool = GpuPool::new(crate::gpus::parse_gpus("fake:1").unwrap());
        let (_tx, rx) = watch::channel(false);
        let t0 = tokio::time::Instant::now();
        type Log = Vec<(u32, &'static str, u128)>;
        let log: Arc<std::sync::Mutex<Log>> = Default::default();
        let (l1, l2) = (log.clone(), log.clone());
        schedule(
            vec![0u32, 1, 2],
            pool,
            rx,
            |i| i.to_string(),
            move |&i| {
                let l = l1.clone();
                async move {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    l.lock()
                        .unwrap()
                        .push((i, "ready", t0.elapsed().as_millis()));
                }
            },
            move |i, _| {
                let l = l2.clone();
                async move {
                    l.lock()
                        .unwrap()
                        .push((i, "start", t0.elapsed().as_millis()));
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
        )
        .await;
        assert_eq!(t0.elapsed().as_millis(), 350);
        let log = log.lock().unwrap().clone();
        assert_eq!(
            log,
            vec![
                (0, "ready", 50),
                (0, "start", 50),
                (1, "ready", 100),
                (1, "start", 150),
                (2, "ready", 200),
                (2, "start", 250)
            ]
        );
    }

    /// A task run that panics gives its GPU back: the next one still runs.
    #[tokio::test]
    async fn a_panicking_task_run_returns_its_gpu() {
        let pool = GpuPool::new(crate::gpus::parse_gpus("fake:1").unwrap());
        let (_tx, rx) = watch::channel(false);
        let ran = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let r2 = ran.clone();
        schedule(
            vec![0u32, 1, 2],
            pool.clone(),
            rx,
            |i| i.to_string(),
            |_| async {},
            move |i, _| {
                let r = r2.clone();
                async move {
                    r.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    if i == 0 {
                        panic!("task run 0 falls over");
                    }
                }
            },
        )
        .await;
        assert_eq!(ran.load(std::sync::atomic::Ordering::SeqCst), 3);
        assert_eq!(pool.busy_with(0), None);
    }

    #[tokio::test]
    async fn cancel_stops_handing_out_work() {
        let pool = GpuPool::new(crate::gpus::parse_gpus("fake:1").unwrap());
        let (tx, rx) = watch::channel(false);
        let started = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let st = started.clone();
        let tx = Arc::new(tx);
        let tx2 = tx.clone();
        schedule(
            (0..5).collect::<Vec<u32>>(),
            pool.clone(),
            rx,
            |i| i.to_string(),
            |_| async {},
            move |_, _| {
                let st = st.clone();
                let tx = tx2.clone();
                async move {
                    if st.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 1 {
                        let _ = tx.send(true);
                    }
                }
            },
        )
        .await;
        assert_eq!(started.load(std::sync::atomic::Ordering::SeqCst), 2);
        assert_eq!(pool.busy_with(0), None);
    }
}
