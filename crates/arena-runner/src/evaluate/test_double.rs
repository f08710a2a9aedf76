//! The test double of the Evaluate API's warm evaluators (tests.rs): a warmer whose
//! evaluators take a set time, log what they do, and can be told to fail, retire or die; a
//! served task and a pool set up around them.

use arena_eval::evaluator_record::EvaluatorRecord;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arena_digest::Digest;
use arena_eval::record::{Evaluation, GateReport, GateStatus, PerfCase};
use arena_image::ImageRecord;
use async_trait::async_trait;
use tokio::time::Instant;

use super::*;
use crate::gpus::{parse_gpus, Gpu};

/// What the fake evaluators did, in order: `start <task>#<n>`, `eval <task>#<n>`,
/// `stop <task>#<n>`.
#[derive(Default)]
pub(super) struct Log(pub(super) Mutex<Vec<String>>);

impl Log {
    pub(super) fn push(&self, s: String) {
        self.0.lock().unwrap().push(s);
    }
    pub(super) fn count(&self, prefix: &str) -> usize {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.starts_with(prefix))
            .count()
    }
}

pub(super) struct FakeWarmer {
    log: Arc<Log>,
    eval_ms: u64,
    started: AtomicUsize,
    /// Evaluations after which an evaluator says it must retire.
    retire_after: Option<usize>,
    /// Every start fails (the original fails its own evaluation).
    fail_start: Arc<AtomicBool>,
    /// How long a start takes.
    start_ms: Arc<AtomicU64>,
    /// Every evaluator's container has ended (alive() says no).
    dead: Arc<AtomicBool>,
}

pub(super) struct FakeWarm {
    name: String,
    log: Arc<Log>,
    eval_ms: u64,
    done: AtomicUsize,
    retire_after: Option<usize>,
    baseline: Baseline,
    dead: Arc<AtomicBool>,
}

pub(super) fn evaluation(ms: f64) -> Evaluation {
    Evaluation::new(
        GateReport::new(GateStatus::Ok, None),
        GateReport::new(GateStatus::Ok, None),
        vec![PerfCase::new("perf1", ms)],
    )
}

#[async_trait]
impl Warm for FakeWarm {
    fn id(&self) -> &str {
        &self.name
    }
    fn baseline(&self) -> &Baseline {
        &self.baseline
    }
    async fn evaluate(
        &self,
        c: &Candidate,
        timing: RequestTiming,
        _: Instant,
    ) -> Result<Evaluated, EvalError> {
        let pairs = timing
            .pairs
            .map(|p| format!(" pairs={p}"))
            .unwrap_or_default();
        let checked = timing
            .checked_calls
            .map(|n| format!(" checked={n}"))
            .unwrap_or_default();
        self.log
            .push(format!("eval {} {}{pairs}{checked}", self.name, c.digest));
        tokio::time::sleep(Duration::from_millis(self.eval_ms)).await;
        let n = self.done.fetch_add(1, Ordering::SeqCst) + 1;
        Ok(Evaluated {
            evaluation: evaluation(1.0),
            record: EvaluatorRecord {
                seed: Some(n.to_string()),
                ..Default::default()
            },
            retire: self
                .retire_after
                .filter(|&k| n >= k)
                .map(|_| "a process survived".to_string()),
        })
    }
    async fn stop(&self) {
        // A container takes a while to go.
        tokio::time::sleep(Duration::from_millis(20)).await;
        self.log.push(format!("stop {}", self.name));
    }
    fn alive(&self) -> bool {
        !self.dead.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl Warmer for FakeWarmer {
    async fn start(
        &self,
        task: Arc<ServedTask>,
        gpu: Gpu,
        _: Instant,
    ) -> Result<Arc<dyn Warm>, EvalError> {
        tokio::time::sleep(Duration::from_millis(self.start_ms.load(Ordering::SeqCst))).await;
        if self.fail_start.load(Ordering::SeqCst) {
            return Err(EvalError::Precondition("the original fails".into()));
        }
        let n = self.started.fetch_add(1, Ordering::SeqCst);
        let name = format!("{}#{n}@gpu{}", task.task.id, gpu.index);
        self.log.push(format!("start {name}"));
        Ok(Arc::new(FakeWarm {
            name,
            log: self.log.clone(),
            eval_ms: self.eval_ms,
            done: AtomicUsize::new(0),
            retire_after: self.retire_after,
            baseline: Baseline {
                evaluation: evaluation(1.0),
                record: Default::default(),
            },
            dead: self.dead.clone(),
        }))
    }
}

pub(super) const HARNESS: &str = "SOURCE = 'source/k.py'\n";

/// A trusted-harness task `id` under `root` (config, harness, kernel), served from a made-up
/// lock.
pub(super) fn served(root: &std::path::Path, id: &str) -> Arc<ServedTask> {
    let dir = root.join(id);
    std::fs::create_dir_all(dir.join("source")).unwrap();
    std::fs::create_dir_all(dir.join("scripts")).unwrap();
    std::fs::write(
        dir.join("config.yaml"),
        "task_type: python2python\nsource_file_path: [source/k.py]\ntarget_kernel_functions: [k]\n\
         compile_command: [\"python3 scripts/h.py compile\"]\n\
         correctness_command: [\"python3 scripts/h.py correctness\"]\n\
         performance_command: [\"python3 scripts/h.py performance\"]\n\
         trusted_harness: scripts/h.py\n",
    )
    .unwrap();
    std::fs::write(dir.join("scripts/h.py"), HARNESS).unwrap();
    std::fs::write(dir.join("source/k.py"), "def k(x):\n    return x\n").unwrap();
    let task = arena_task::Task::load(&dir, id).unwrap();
    let d = Digest::of_bytes(id.as_bytes());
    Arc::new(ServedTask {
        key: format!("lock {id}"),
        image: ImageRecord {
            name: id.into(),
            derivation: d.clone(),
            base: "scratch".into(),
            task: Some(id.into()),
            task_digest: Some(d.to_string()),
            layers: Vec::new(),
            config: d.clone(),
            config_size: 0,
            manifest: d.clone(),
            manifest_size: 0,
        },
        lock_path: root.join("x.lock"),
        lock_digest: d.clone(),
        task_digest: d,
        task,
    })
}

pub(super) struct Setup {
    pub(super) _dir: tempfile::TempDir,
    pub(super) root: std::path::PathBuf,
    pub(super) log: Arc<Log>,
    pub(super) pool: Arc<Pool>,
    pub(super) gpus: Arc<crate::scheduler::GpuPool>,
    pub(super) start_ms: Arc<AtomicU64>,
    pub(super) dead: Arc<AtomicBool>,
    pub(super) fail_start: Arc<AtomicBool>,
}

pub(super) fn setup(
    gpus: &str,
    settings: PoolSettings,
    eval_ms: u64,
    retire_after: Option<usize>,
) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(Log::default());
    let (start_ms, dead) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicBool::new(false)),
    );
    let fail_start = Arc::new(AtomicBool::new(false));
    let warmer = FakeWarmer {
        log: log.clone(),
        eval_ms,
        started: AtomicUsize::new(0),
        retire_after,
        fail_start: fail_start.clone(),
        start_ms: start_ms.clone(),
        dead: dead.clone(),
    };
    let gpus = crate::scheduler::GpuPool::new(parse_gpus(gpus).unwrap());
    Setup {
        root: dir.path().to_path_buf(),
        _dir: dir,
        log,
        pool: Pool::new(Arc::new(warmer), gpus.clone(), settings),
        gpus,
        start_ms,
        dead,
        fail_start,
    }
}

pub(super) fn candidate(s: &Setup, t: &ServedTask, body: &str) -> Candidate {
    let files = BTreeMap::from([("source/k.py".to_string(), body.as_bytes().to_vec())]);
    candidate::stage(&t.task, files, &s.root).unwrap()
}

pub(super) fn later(ms: u64) -> Instant {
    Instant::now() + Duration::from_millis(ms)
}
