//! The Slurm backend end to end: a real single-node Slurm (ci/slurm.sh) and a real containerd,
//! one job per task run, scancel, resume, bundles. Needs root, Slurm, munge, containerd, runc.

use crate::common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::daemon::*;
use common::repo;
use serde_json::Value;

/// A single-node Slurm cluster (ci/slurm.sh) with fake GPUs, stopped when dropped.
struct Slurm {
    dir: PathBuf,
    conf: String,
}

impl Slurm {
    fn start(dir: &Path, gpus: u32) -> Slurm {
        let o = Command::new("bash")
            .arg(repo().join("ci/slurm.sh"))
            .arg("start")
            .arg(dir)
            .arg(gpus.to_string())
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", show(&o));
        let conf = String::from_utf8(o.stdout).unwrap().trim().to_string();
        Slurm {
            dir: dir.to_path_buf(),
            conf,
        }
    }

    fn cmd(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.env("SLURM_CONF", &self.conf);
        c
    }

    /// squeue's state of a job ("" once Slurm forgot it).
    fn state(&self, job: &str) -> String {
        let o = self
            .cmd("squeue")
            .args(["-h", "--states=all", "-o", "%T", "-j", job])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    }
}

impl Drop for Slurm {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(repo().join("ci/slurm.sh"))
            .arg("stop")
            .arg(&self.dir)
            .status();
    }
}

/// Waits until a Slurm job of the run in `out` has started its agent (its log says so);
/// returns that job's id.
fn agent_started(out: &Path) -> String {
    let t0 = Instant::now();
    loop {
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "no job started its agent"
        );
        let started = std::fs::read_dir(out.join("slurm"))
            .into_iter()
            .flatten()
            .flatten()
            .find(|e| {
                std::fs::read_to_string(e.path()).is_ok_and(|t| t.contains("agent slow started"))
            });
        if let Some(e) = started {
            let name = e.file_name().to_string_lossy().into_owned();
            let id = name.rsplit_once('-').unwrap().1.trim_end_matches(".log");
            return id.to_string();
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Every job log of the run in `out`, for a failure message.
fn job_logs(out: &Path) -> String {
    let mut logs: Vec<_> = std::fs::read_dir(out.join("slurm"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    logs.sort();
    logs.iter()
        .map(|p| {
            let t = std::fs::read_to_string(p).unwrap_or_default();
            format!("--- {}\n{t}", p.display())
        })
        .collect()
}

fn ledger(out: &Path) -> Vec<Value> {
    let v: Value =
        serde_json::from_slice(&std::fs::read(out.join("slurm/jobs.json")).unwrap()).unwrap();
    v["jobs"].as_array().unwrap().clone()
}

fn gates(e: &Value) -> (Value, Value) {
    (
        e["compile"]["status"].clone(),
        e["correctness"]["status"].clone(),
    )
}

#[test]
fn slurm_backend_runs_one_job_per_task_run_and_survives_scancel() {
    let d = Daemon::start();
    let tmp = d.dir.path();
    let slurm = Slurm::start(&tmp.join("slurm"), 3);
    let head = |agent: &str, out: &Path, extra: &[&str]| {
        let mut c = slurm.cmd(env!("CARGO_BIN_EXE_arenactl"));
        c.current_dir(repo())
            .args(d.run_args(agent, out))
            .args(["--backend", "slurm", "--json"])
            .args(extra);
        c
    };

    // The same tasks and agent, locally and as Slurm jobs: the same gates and outcomes.
    let o = arenactl()
        .args(d.run_args("ci/agents/optimize.toml", &tmp.join("local")))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let o = head("ci/agents/optimize.toml", &tmp.join("jobs"), &[])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let (local, jobs) = (results(&tmp.join("local")), results(&tmp.join("jobs")));
    assert_eq!(local.len(), 2, "{local:#?}");
    assert_eq!(jobs.len(), 2);
    for (l, j) in local.iter().zip(&jobs) {
        assert_eq!(l["task_id"], j["task_id"]);
        for phase in ["baseline", "candidate"] {
            assert_eq!(gates(&l[phase]), gates(&j[phase]), "{phase}: {l} vs {j}");
        }
        // Correct, its speed measured; how fast is not judged here: on 3 fake GPUs of a
        // 2-core machine each job's containers get two thirds of a core (--cpus-per-gpu), and
        // a self-timed kernel under that quota reads its speedup within noise of 1.
        assert!(score(j).speedup > 0.0, "{j}");
        assert!(score(j).score > 120.0, "{j}");
        for k in [
            "task",
            "harness",
            "image",
            "agent_image",
            "agent",
            "lockfile",
        ] {
            assert_eq!(
                j["provenance"][k], l["provenance"][k],
                "the same locked inputs"
            );
        }
    }
    // Both jobs ran at once, each on the GPU Slurm gave it.
    let gpus: BTreeSet<u64> = jobs
        .iter()
        .map(|r| r["gpu"]["index"].as_u64().unwrap())
        .collect();
    assert_eq!(gpus.len(), 2, "two jobs shared a GPU: {jobs:?}");
    let l = ledger(&tmp.join("jobs"));
    let why = format!("ledger: {l:#?}\n{}", job_logs(&tmp.join("jobs")));
    assert_eq!(l.len(), 2, "{why}");
    assert!(l.iter().all(|j| j["state"] == "COMPLETED"), "{why}");

    // Nodes with their own, empty stores: each job fills its store from a bundle (every blob
    // verified) before it checks the images.
    let bundle = tmp.join("cpu-bundle.tar");
    let o = arenactl()
        .args([
            "bundle",
            "export",
            "--image-lock",
            "lockfiles/cpu.lock",
            "-o",
        ])
        .arg(&bundle)
        .arg("--store")
        .arg(store())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let node_store = tmp.join("node-store");
    let mut c = slurm.cmd(env!("CARGO_BIN_EXE_arenactl"));
    c.current_dir(repo())
        .args([
            "run",
            "--image-lock",
            "lockfiles/cpu.lock",
            "--agent",
            "ci/agents/break.toml",
        ])
        .args([
            "--gpus",
            "cpu:1",
            "--containerd",
            &d.socket,
            "--backend",
            "slurm",
            "--json",
        ])
        .args(CHEAP_TIMING)
        .arg("--store")
        .arg(&node_store)
        .arg("--bundle")
        .arg(&bundle)
        .arg("--out")
        .arg(tmp.join("bundled"));
    let o = c.output().unwrap();
    assert!(o.status.success(), "{}", show(&o));
    for r in results(&tmp.join("bundled")) {
        assert_eq!(score(&r).score, 20.0, "{r}");
    }
    assert!(node_store.join("blobs/sha256").read_dir().unwrap().count() > 3);

    // scancel of one job while its agent runs: the head records Slurm's verdict and (with no
    // retries) gives that task run up; the same command again runs only that one.
    let slow = tmp.join("slow.toml");
    std::fs::write(
        &slow,
        "name = \"slow\"\ncommand = [\"sh\", \"-c\", \"sleep 5\"]\ntimeout_s = 60\n",
    )
    .unwrap();
    let out = tmp.join("scancel");
    let args = ["--runs", "2", "--retries", "0"];
    let child = head(slow.to_str().unwrap(), &out, &args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let victim = agent_started(&out);
    assert_eq!(slurm.state(&victim), "RUNNING");
    let o = slurm.cmd("scancel").arg(&victim).output().unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let o = child.wait_with_output().unwrap();
    assert!(!o.status.success(), "a cancelled task run was not reported");
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    let l = ledger(&out);
    let why = || format!("{report}\nledger: {l:?}\n{}", job_logs(&out));
    assert_eq!(report["finished"], 3, "{}", why());
    assert_eq!(report["errors"], 1, "{}", why());
    let cancelled = l.iter().find(|j| j["job_id"] == victim.as_str()).unwrap();
    assert_eq!(cancelled["state"], "CANCELLED", "{cancelled}");
    assert!(
        cancelled["failure"]
            .as_str()
            .unwrap()
            .contains("ended CANCELLED"),
        "{cancelled}"
    );
    let before: Vec<(PathBuf, Vec<u8>)> = glob_results(&out)
        .into_iter()
        .map(|p| {
            let b = std::fs::read(&p).unwrap();
            (p, b)
        })
        .collect();
    let o = head(slow.to_str().unwrap(), &out, &args).output().unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["finished"], 4, "{report}");
    for (p, b) in &before {
        assert_eq!(
            &std::fs::read(p).unwrap(),
            b,
            "a finished task run was repeated"
        );
    }
    let rs = results(&out);
    let keys = task_runs(&rs);
    assert_eq!((rs.len(), keys.len()), (4, 4), "a task run counted twice");
    let l = ledger(&out);
    assert_eq!(
        l.len(),
        5,
        "only the cancelled task run was submitted again: {l:?}"
    );

    // `arenactl cancel RUN_DIR` stops a run whose head is following it: no retries, exit 130,
    // and the jobs' containers are removed as they go.
    let out = tmp.join("cancel");
    let child = head(slow.to_str().unwrap(), &out, &["--retries", "3"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    agent_started(&out);
    let o = slurm
        .cmd(env!("CARGO_BIN_EXE_arenactl"))
        .args(["cancel", "--json"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let cancelled: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(!cancelled["cancelled"].as_array().unwrap().is_empty());
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130));
    assert!(ledger(&out)
        .iter()
        .all(|j| j["state"] == "CANCELLED" || j["state"] == "COMPLETED"));
    let t0 = Instant::now();
    for j in ledger(&out) {
        let id = j["job_id"].as_str().unwrap().to_string();
        while !matches!(slurm.state(&id).as_str(), "CANCELLED" | "COMPLETED" | "") {
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "job {id} did not end"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    assert!(empty(&d.leftovers()), "a cancelled job left containers");
    // Nor a workspace's file system mounted on the host (the agent step was cut short).
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let under = tmp.to_string_lossy().to_string();
    let left: Vec<&str> = mounts.lines().filter(|l| l.contains(&under)).collect();
    assert!(left.is_empty(), "a cancelled job left mounts: {left:?}");
}
