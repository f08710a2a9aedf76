//! An in-memory container engine for unit tests: images are names with manifests, a
//! container is a spec and a "program" — an async Rust function chosen by matching the spec —
//! that plays the container's process: it reads and writes the host side of the container's
//! bind mounts, prints to its logs, sleeps, exits with a code. Kill aborts the program (exit
//! 137). Every verb is recorded in order, and any verb can be made to fail, so that a test
//! can walk every path of the code above the boundary without root or a daemon.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use arena_image::{Digest, ImageRecord, Store};
use async_trait::async_trait;
use tokio::sync::watch;

use crate::boundary::{
    Captured, ContainerRuntime, ContainerSpec, Leftovers, LogStats, RUN_LEASE_PREFIX,
};
use crate::error::{Result, RuntimeError};
use crate::ImageRef;

/// What a program sees of its container.
#[derive(Clone)]
pub struct FakeProcess {
    pub spec: ContainerSpec,
    out: Arc<Mutex<(Captured, Captured)>>,
}

impl FakeProcess {
    pub fn args(&self) -> &[String] {
        &self.spec.config.args
    }

    /// The value of an environment variable of the process.
    pub fn env(&self, name: &str) -> Option<String> {
        self.spec
            .config
            .env
            .iter()
            .rev()
            .find_map(|e| e.strip_prefix(&format!("{name}=")).map(String::from))
    }

    /// The host path behind a container path, through the container's bind mounts (the
    /// deepest mount wins); None where the path is not on a bind (the image's root).
    pub fn host_path(&self, container_path: &str) -> Option<PathBuf> {
        let mut best: Option<(&str, &Path)> = None;
        for b in &self.spec.config.binds {
            let d = b.destination.as_str();
            let under = container_path == d
                || container_path
                    .strip_prefix(d)
                    .is_some_and(|r| r.starts_with('/'));
            if under && best.is_none_or(|(bd, _)| d.len() > bd.len()) {
                best = Some((d, b.source.as_path()));
            }
        }
        let (d, src) = best?;
        let rest = container_path[d.len()..].trim_start_matches('/');
        Some(if rest.is_empty() {
            src.to_path_buf()
        } else {
            src.join(rest)
        })
    }

    /// Whether the bind at `container_path` is read-only.
    pub fn readonly(&self, container_path: &str) -> Option<bool> {
        self.spec
            .config
            .binds
            .iter()
            .find(|b| b.destination == container_path)
            .map(|b| b.readonly)
    }

    fn write_stream(&self, stderr: bool, text: &str) {
        let path = if stderr {
            &self.spec.stderr
        } else {
            &self.spec.stdout
        };
        let mut c = self.out.lock().unwrap();
        let cap = self.spec.log_cap;
        let stream = if stderr { &mut c.1 } else { &mut c.0 };
        let room = cap.saturating_sub(stream.written) as usize;
        let take = room.min(text.len());
        if take > 0 {
            if let Ok(mut f) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
            {
                let _ = f.write_all(&text.as_bytes()[..take]);
            }
            stream.written += take as u64;
        }
        stream.total += text.len() as u64;
    }

    pub fn print(&self, text: &str) {
        self.write_stream(false, text)
    }

    pub fn eprint(&self, text: &str) {
        self.write_stream(true, text)
    }
}

pub type ProgramFuture = Pin<Box<dyn Future<Output = u32> + Send>>;
type Program = Arc<dyn Fn(FakeProcess) -> ProgramFuture + Send + Sync>;
type Matcher = Arc<dyn Fn(&ContainerSpec) -> bool + Send + Sync>;

struct FakeContainer {
    spec: ContainerSpec,
    started: bool,
    exit: watch::Sender<Option<u32>>,
    task: Option<tokio::task::JoinHandle<()>>,
    /// The program itself (killed with the container).
    program: Option<tokio::task::AbortHandle>,
    out: Arc<Mutex<(Captured, Captured)>>,
}

#[derive(Default)]
struct State {
    images: HashMap<String, Digest>,
    containers: BTreeMap<String, FakeContainer>,
    /// Every spec created, in order (deleted containers too).
    history: Vec<ContainerSpec>,
    calls: Vec<String>,
    failures: Vec<(String, String, String)>,
    /// (verb, id part, matching calls still to let through).
    panics: Vec<(String, String, u32)>,
    /// Scratch directories mounted now, and their sizes.
    scratch: BTreeMap<PathBuf, u64>,
}

#[derive(Clone, Default)]
pub struct FakeRuntime {
    state: Arc<Mutex<State>>,
    programs: Arc<Mutex<Vec<(Matcher, Program)>>>,
}

impl FakeRuntime {
    pub fn new() -> FakeRuntime {
        FakeRuntime::default()
    }

    /// Runs `program` as the process of every container whose spec `matches` (the program
    /// registered last wins, so a test can override a default; a container nothing matches
    /// exits 0 at once).
    pub fn program<M, F, Fut>(&self, matches: M, program: F)
    where
        M: Fn(&ContainerSpec) -> bool + Send + Sync + 'static,
        F: Fn(FakeProcess) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = u32> + Send + 'static,
    {
        let p: Program = Arc::new(move |proc| Box::pin(program(proc)));
        self.programs.lock().unwrap().push((Arc::new(matches), p));
    }

    /// Makes the next call of `verb` on a container whose id contains `id_part` fail with
    /// `message` (a containerd "unavailable" error).
    pub fn fail_next(&self, verb: &str, id_part: &str, message: &str) {
        self.state.lock().unwrap().failures.push((
            verb.to_string(),
            id_part.to_string(),
            message.to_string(),
        ));
    }

    /// Makes the next call of `verb` on a container whose id contains `id_part` panic (a bug
    /// in the code above the boundary, as the caller sees it).
    pub fn panic_next(&self, verb: &str, id_part: &str) {
        self.panic_nth(verb, id_part, 1)
    }

    /// Makes the `n`th next call (from 1) of `verb` on a container whose id contains
    /// `id_part` panic.
    pub fn panic_nth(&self, verb: &str, id_part: &str, n: u32) {
        self.state.lock().unwrap().panics.push((
            verb.to_string(),
            id_part.to_string(),
            n.saturating_sub(1),
        ));
    }

    /// Every verb called so far, as `verb id`.
    pub fn calls(&self) -> Vec<String> {
        self.state.lock().unwrap().calls.clone()
    }

    /// Ids of the containers that exist now.
    pub fn containers(&self) -> Vec<String> {
        self.state
            .lock()
            .unwrap()
            .containers
            .keys()
            .cloned()
            .collect()
    }

    /// The spec of the last container created whose id contains `id_part` (deleted or not).
    pub fn spec_of(&self, id_part: &str) -> Option<ContainerSpec> {
        let s = self.state.lock().unwrap();
        s.history
            .iter()
            .rev()
            .find(|c| c.id.contains(id_part))
            .cloned()
    }

    /// Every spec created so far, in order.
    pub fn history(&self) -> Vec<ContainerSpec> {
        self.state.lock().unwrap().history.clone()
    }

    /// Replaces a label of an existing container (a test's way to make its owner dead).
    pub fn set_label(&self, id: &str, key: &str, value: &str) {
        if let Some(c) = self.state.lock().unwrap().containers.get_mut(id) {
            c.spec.labels.insert(key.to_string(), value.to_string());
        }
    }

    /// The scratch directories mounted now, with their sizes.
    pub fn scratch(&self) -> BTreeMap<PathBuf, u64> {
        self.state.lock().unwrap().scratch.clone()
    }

    /// Whether the image `name` is held, with its manifest.
    pub fn image(&self, name: &str) -> Option<Digest> {
        self.state.lock().unwrap().images.get(name).cloned()
    }

    /// Holds `manifest` under `name` (as if imported earlier).
    pub fn hold_image(&self, name: &str, manifest: Digest) {
        self.state
            .lock()
            .unwrap()
            .images
            .insert(name.to_string(), manifest);
    }

    fn enter(&self, verb: &str, id: &str) -> Result<()> {
        let mut s = self.state.lock().unwrap();
        s.calls.push(format!("{verb} {id}"));
        if let Some(i) = s
            .panics
            .iter()
            .position(|(v, part, _)| v == verb && id.contains(part.as_str()))
        {
            if s.panics[i].2 > 0 {
                s.panics[i].2 -= 1;
            } else {
                s.panics.remove(i);
                drop(s);
                panic!("injected panic in {verb} {id}");
            }
        }
        if let Some(i) = s
            .failures
            .iter()
            .position(|(v, part, _)| v == verb && id.contains(part.as_str()))
        {
            let (_, _, msg) = s.failures.remove(i);
            return Err(RuntimeError::Containerd {
                call: "fake",
                what: format!("{verb} {id}"),
                status: Box::new(tonic::Status::unavailable(msg)),
            });
        }
        Ok(())
    }

    fn not_found(verb: &'static str, id: &str) -> RuntimeError {
        RuntimeError::Containerd {
            call: verb,
            what: id.to_string(),
            status: Box::new(tonic::Status::not_found(format!("container {id}"))),
        }
    }

    fn program_for(&self, spec: &ContainerSpec) -> Option<Program> {
        self.programs
            .lock()
            .unwrap()
            .iter()
            .rev()
            .find(|(m, _)| m(spec))
            .map(|(_, p)| p.clone())
    }
}

#[async_trait]
impl ContainerRuntime for FakeRuntime {
    fn namespace(&self) -> &str {
        "fake"
    }

    async fn ensure_image(&self, _store: &Store, rec: &ImageRecord) -> Result<ImageRef> {
        self.enter("ensure_image", &rec.name)?;
        let image = ImageRef::from_record(rec)?;
        let mut s = self.state.lock().unwrap();
        match s.images.get(&rec.name) {
            Some(d) if *d != rec.manifest => Err(RuntimeError::ImageMismatch {
                name: rec.name.clone(),
                expected: rec.manifest.to_string(),
                found: d.to_string(),
            }),
            _ => {
                s.images.insert(rec.name.clone(), rec.manifest.clone());
                Ok(image)
            }
        }
    }

    async fn create(&self, spec: &ContainerSpec) -> Result<()> {
        self.enter("create", &spec.id)?;
        // What the real engine refuses before anything exists: a spec it cannot express.
        crate::spec::build_spec(&spec.config)?;
        let mut s = self.state.lock().unwrap();
        if s.containers.contains_key(&spec.id) {
            return Err(RuntimeError::Containerd {
                call: "containers.Create",
                what: spec.id.clone(),
                status: Box::new(tonic::Status::already_exists(spec.id.clone())),
            });
        }
        for p in [&spec.stdout, &spec.stderr] {
            std::fs::write(p, b"").map_err(|e| RuntimeError::io(p, e))?;
        }
        s.history.push(spec.clone());
        s.containers.insert(
            spec.id.clone(),
            FakeContainer {
                spec: spec.clone(),
                started: false,
                exit: watch::channel(None).0,
                task: None,
                program: None,
                out: Default::default(),
            },
        );
        Ok(())
    }

    async fn start(&self, id: &str) -> Result<()> {
        self.enter("start", id)?;
        let (spec, exit, out) = {
            let s = self.state.lock().unwrap();
            let c = s
                .containers
                .get(id)
                .ok_or_else(|| Self::not_found("tasks.Start", id))?;
            (c.spec.clone(), c.exit.clone(), c.out.clone())
        };
        let program = self.program_for(&spec);
        let proc = FakeProcess { spec, out };
        let inner = program.map(|p| tokio::spawn(p(proc)));
        let abort = inner.as_ref().map(|h| h.abort_handle());
        let task = tokio::spawn(async move {
            let code = match inner {
                Some(h) => match h.await {
                    Ok(code) => code,
                    // Killed: kill() has set the exit status.
                    Err(e) if e.is_cancelled() => return,
                    // A program that panics is a process that crashed (SIGABRT).
                    Err(_) => 128 + 6,
                },
                None => 0,
            };
            exit.send_replace(Some(code));
        });
        let mut s = self.state.lock().unwrap();
        if let Some(c) = s.containers.get_mut(id) {
            c.started = true;
            c.task = Some(task);
            c.program = abort;
        }
        Ok(())
    }

    async fn wait(&self, id: &str) -> Result<u32> {
        self.enter("wait", id)?;
        let mut rx = {
            let s = self.state.lock().unwrap();
            s.containers
                .get(id)
                .ok_or_else(|| Self::not_found("tasks.Wait", id))?
                .exit
                .subscribe()
        };
        loop {
            if let Some(code) = *rx.borrow() {
                return Ok(code);
            }
            if rx.changed().await.is_err() {
                return Err(Self::not_found("tasks.Wait", id));
            }
        }
    }

    async fn kill(&self, id: &str, signal: u32) -> Result<()> {
        self.enter("kill", id)?;
        let s = self.state.lock().unwrap();
        let c = s
            .containers
            .get(id)
            .ok_or_else(|| Self::not_found("tasks.Kill", id))?;
        if c.exit.borrow().is_none() && c.started {
            if let Some(p) = &c.program {
                p.abort();
            }
            if let Some(t) = &c.task {
                t.abort();
            }
            c.exit.send_replace(Some(128 + signal));
        }
        Ok(())
    }

    async fn delete(&self, id: &str) -> Result<LogStats> {
        self.enter("delete", id)?;
        let removed = self.state.lock().unwrap().containers.remove(id);
        let Some(c) = removed else {
            return Ok(LogStats::default());
        };
        if let Some(p) = c.program {
            p.abort();
        }
        if let Some(t) = c.task {
            t.abort();
        }
        let (stdout, stderr) = c.out.lock().unwrap().clone();
        Ok(LogStats { stdout, stderr })
    }

    async fn leftovers(&self) -> Result<Leftovers> {
        self.enter("leftovers", "")?;
        let s = self.state.lock().unwrap();
        let mut out = Leftovers::default();
        for (id, c) in &s.containers {
            out.containers.push(id.clone());
            out.snapshots.push(id.clone());
            out.leases.push(format!("{RUN_LEASE_PREFIX}{id}"));
            out.labels.insert(id.clone(), c.spec.labels.clone());
            out.labels
                .insert(format!("{RUN_LEASE_PREFIX}{id}"), c.spec.labels.clone());
        }
        Ok(out)
    }

    async fn mount_scratch(&self, dir: &Path, bytes: u64) -> Result<()> {
        self.enter("mount_scratch", &dir.display().to_string())?;
        std::fs::create_dir_all(dir).map_err(|e| RuntimeError::io(dir, e))?;
        self.state
            .lock()
            .unwrap()
            .scratch
            .insert(dir.to_path_buf(), bytes);
        Ok(())
    }

    async fn unmount_scratch(&self, dir: &Path) -> Result<()> {
        self.enter("unmount_scratch", &dir.display().to_string())?;
        // What a real unmount does to the content: it is gone.
        if self.state.lock().unwrap().scratch.remove(dir).is_some() {
            let _ = std::fs::remove_dir_all(dir);
            let _ = std::fs::create_dir_all(dir);
        }
        Ok(())
    }

    async fn remove(&self, found: &Leftovers) -> Result<()> {
        self.enter("remove", &found.containers.join(","))?;
        let mut s = self.state.lock().unwrap();
        for id in &found.containers {
            if let Some(c) = s.containers.remove(id) {
                if let Some(p) = c.program {
                    p.abort();
                }
                if let Some(t) = c.task {
                    t.abort();
                }
            }
        }
        Ok(())
    }
}
