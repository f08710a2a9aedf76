//! Hidden unseen configurations end to end: they reach only evaluators; an overfitting agent
//! lands in opt_regression; `arenactl unseen eval` after the fact; an adversarial agent told
//! the values out of band finds them nowhere. Needs root, containerd and runc.

use crate::common;

use std::path::Path;

use common::daemon::*;
use serde_json::Value;

#[test]
fn unseen_configurations_reach_only_the_evaluator() {
    let d = Daemon::start();
    let tmp = d.dir.path();
    let hidden = tmp.join("hidden-set-e2e");
    let o = arenactl()
        .args([
            "unseen",
            "generate",
            "--tasks",
            "tasks",
            "--seed",
            "11",
            "--per-task",
            "6",
            "--out",
        ])
        .arg(&hidden)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let digest = String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    // `tasks`: all of them where empty.
    let with_unseen = |agent: &str, out: &Path, tasks: &[&str]| -> Value {
        let mut args = d.run_args_all(agent, out);
        if !tasks.is_empty() {
            args.push("--tasks".to_string());
            args.extend(tasks.iter().map(|t| t.to_string()));
        }
        args.extend([
            "--unseen".to_string(),
            hidden.display().to_string(),
            "--json".to_string(),
        ]);
        let o = arenactl().args(&args).output().unwrap();
        assert!(o.status.success(), "{}", show(&o));
        serde_json::from_slice(&o.stdout).unwrap()
    };

    // Hard-coding the visible shapes passes seen correctness and fails the unseen ones; the
    // honest kernel passes both.
    let report = with_unseen("ci/agents/overfit.toml", &tmp.join("overfit"), &[]);
    for r in results(&tmp.join("overfit")) {
        assert_eq!(r["unseen"]["set_digest"], digest.as_str());
        assert_eq!(
            r["candidate"]["correctness"]["status"], "ok",
            "seen correctness: {r}"
        );
    }
    let g = &report["report"]["generalization"];
    let row = g
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["task_type"] == "python2python")
        .unwrap();
    assert_eq!(row["quadrants"]["opt_regression"], 1, "{g}");
    assert_eq!(row["quadrants"]["both_pass"], 2, "{g}");
    assert!(row["delta_g"].as_f64().is_some(), "Δg not computed: {g}");
    // The overfit kernel is wrong on every unseen size, and the probe says so per category;
    // the original kernel fails none.
    let failures = |r: &Value, field: &str| -> u64 {
        r["unseen"][field]
            .as_object()
            .unwrap()
            .values()
            .map(|n| n.as_u64().unwrap())
            .sum()
    };
    for r in results(&tmp.join("overfit")) {
        let overfit = r["task_id"].as_str().unwrap().ends_with("prefix_sum");
        let expected = if overfit { 6 } else { 0 };
        assert_eq!(failures(&r, "failures_by_category"), expected, "{r}");
        assert_eq!(failures(&r, "original_failures_by_category"), 0, "{r}");
    }
    let by_category: u64 = row["failures_by_category"]
        .as_object()
        .unwrap()
        .values()
        .map(|n| n.as_u64().unwrap())
        .sum();
    assert_eq!(by_category, 6, "{g}");

    // After the run, on a new set: `unseen eval` re-evaluates the finished task runs, results
    // name the new digest, the seen results stay as they were; again, nothing is repeated.
    let hidden2 = tmp.join("hidden-set-e2e-2");
    let o = arenactl()
        .args([
            "unseen",
            "generate",
            "--tasks",
            "tasks",
            "--seed",
            "12",
            "--per-task",
            "4",
        ])
        .arg("--out")
        .arg(&hidden2)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let digest2 = String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    assert_ne!(digest, digest2);
    let before = results(&tmp.join("overfit"));
    let eval = || {
        let o = arenactl()
            .args(["unseen", "eval"])
            .arg(tmp.join("overfit"))
            .arg("--unseen")
            .arg(&hidden2)
            .args(["--containerd", &d.socket, "--gpus", "cpu:1", "--json"])
            .arg("--store")
            .arg(store())
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", show(&o));
        serde_json::from_slice::<Value>(&o.stdout).unwrap()
    };
    let report2 = eval();
    let after = results(&tmp.join("overfit"));
    assert_eq!(before.len(), after.len());
    for (b, a) in before.iter().zip(&after) {
        assert_eq!(a["unseen"]["set_digest"], digest2.as_str());
        assert_eq!(a["candidate"], b["candidate"], "the seen result changed");
        assert_eq!(a["baseline"], b["baseline"]);
        let overfit = a["task_id"].as_str().unwrap().ends_with("prefix_sum");
        assert_eq!(
            failures(a, "failures_by_category"),
            if overfit { 4 } else { 0 }
        );
    }
    let row2 = report2["report"]["generalization"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["task_type"] == "python2python")
        .unwrap()
        .clone();
    assert_eq!(row2["quadrants"]["opt_regression"], 1, "{row2}");
    let bytes: Vec<Vec<u8>> = glob_results(&tmp.join("overfit"))
        .iter()
        .map(|p| std::fs::read(p).unwrap())
        .collect();
    eval();
    let again: Vec<Vec<u8>> = glob_results(&tmp.join("overfit"))
        .iter()
        .map(|p| std::fs::read(p).unwrap())
        .collect();
    assert_eq!(
        bytes, again,
        "a task run evaluated on this set was evaluated again"
    );
    // A directory that holds no run is refused, naming its run.json.
    std::fs::create_dir_all(tmp.join("no-such-run")).unwrap();
    let o = arenactl()
        .args(["unseen", "eval"])
        .arg(tmp.join("no-such-run"))
        .arg("--unseen")
        .arg(&hidden2)
        .args(["--containerd", &d.socket, "--gpus", "cpu:1"])
        .arg("--store")
        .arg(store())
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("run.json"),
        "{}",
        show(&o)
    );

    // An adversarial agent, told the unseen values out of band, searches everything it can
    // see — its filesystem (the image's /usr aside: it is locked before any set exists), its
    // mounts, every process's environment and command line — and finds nothing. A positive
    // control proves the search finds the values where they are.
    let needles_file = tmp.join("oob/needles");
    std::fs::create_dir_all(needles_file.parent().unwrap()).unwrap();
    let ns = needles(&hidden);
    assert!(ns.len() >= 3, "too few distinctive entries: {ns:?}");
    std::fs::write(&needles_file, ns.join("\n") + "\n").unwrap();
    let agent = tmp.join("adversary.toml");
    std::fs::write(
        &agent,
        format!(
            r#"name = "adversary"
command = ["sh", "-c", """
N=/oob/needles
search() {{ for d in "$@"; do find "$d" -xdev -type f 2>/dev/null; done | grep -v -e '^/usr/' -e '^/oob/' | xargs grep -lF -f $N 2>/dev/null; }}
mkdir -p /tmp/control && cp $N /tmp/control/copy
search /tmp/control > /workspace/control.txt
rm -rf /tmp/control
search / /workspace /reference /tmp /arena > /workspace/findings.txt
for p in /proc/[0-9]*; do cat $p/environ $p/cmdline 2>/dev/null | tr '\\0' '\\n'; done | grep -F -f $N >> /workspace/findings.txt
env | grep -F -f $N >> /workspace/findings.txt
grep -F -f $N /proc/self/mountinfo >> /workspace/findings.txt
echo searched > /workspace/done.txt
"""]
timeout_s = 120

[[mount]]
host = "{}"
container = "/oob"
"#,
            needles_file.parent().unwrap().display()
        ),
    )
    .unwrap();
    let out = tmp.join("adversary");
    // One task: every agent container is made alike, whatever the task's trust.
    with_unseen(
        agent.to_str().unwrap(),
        &out,
        &["python2python/arena/prefix_sum"],
    );
    for r in results(&out) {
        let ws = out
            .join("tasks")
            .join(r["task_id"].as_str().unwrap().replace('/', "__"))
            .join("r0/workspace.kept");
        assert_eq!(
            std::fs::read_to_string(ws.join("done.txt")).unwrap(),
            "searched\n"
        );
        assert_eq!(
            std::fs::read_to_string(ws.join("control.txt")).unwrap(),
            "/tmp/control/copy\n",
            "the search does not work"
        );
        let found = std::fs::read_to_string(ws.join("findings.txt")).unwrap();
        assert!(
            found.is_empty(),
            "the agent found unseen configurations:\n{found}"
        );
        // The unseen evaluations did run, on the same set.
        assert_eq!(r["unseen"]["set_digest"], digest.as_str());
        // Nothing of the set is left in the task run's directory but the evaluators' reports.
        assert!(!ws.parent().unwrap().join("unseen-harness").exists());
    }

    // A kernel that searches the evaluator it runs in (files, /proc) prints what it read;
    // nothing of the set reaches any file of the run directory.
    let out = tmp.join("hidden-search");
    // A trusted evaluator and a self-reported one: the kernel searches each kind.
    with_unseen(
        "ci/agents/adversary/hidden_search.toml",
        &out,
        &[
            "python2python/arena/prefix_sum",
            "python2python/arena/sum_squares",
        ],
    );
    let logs = phase_logs(&out, "python2python/arena/prefix_sum", "candidate");
    assert!(
        logs.contains("READ /proc/"),
        "the search did not run: {logs}"
    );
    // ns[0] is the set's path, which run.json names.
    for needle in &ns[1..] {
        let hits = files_containing(&out, needle.as_bytes());
        assert!(hits.is_empty(), "{needle} found in {hits:?}");
    }

    // A kernel right on compile and correctness that, in the unseen performance gate, puts
    // the sizes and values of its inputs into every channel it has (an exception's words and
    // type name, its output, files): only a kind comes out, and no file of the run and no
    // report holds any of it.
    let out = tmp.join("unseen-leak");
    let mut args = d.run_args_all("ci/agents/adversary/unseen_leak.toml", &out);
    args.extend(
        [
            "--tasks",
            PREFIX_SUM,
            "--unseen",
            hidden.to_str().unwrap(),
            "--json",
        ]
        .map(String::from),
    );
    let o = arenactl().args(&args).output().unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let r = &results(&out)[0];
    assert!(score(r).correct, "visible sizes: the untouched kernel: {r}");
    let cases = r["unseen"]["optimized"]["performance"].as_array().unwrap();
    assert!(
        !cases.is_empty()
            && cases.iter().all(|c| c["error"]
                .as_str()
                .is_some_and(|e| e.ends_with(": kernel_failed"))),
        "the kernel raised in every unseen case, told by kind: {r}"
    );
    for format in ["html", "md", "json"] {
        let o = arenactl()
            .arg("report")
            .arg(&out)
            .args(["--format", format, "--out"])
            .arg(out.join(format!("leak-report.{format}")))
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", show(&o));
    }
    let mut leaks = vec!["UNSEENLEAK".to_string()];
    for n in hidden_sizes(&hidden, "prefix_sum") {
        leaks.push(format!("({n},)"));
        if n >= 1000 {
            leaks.push(format!("n={n}"));
        }
    }
    for needle in &leaks {
        let hits = files_containing(&out, needle.as_bytes());
        assert!(hits.is_empty(), "{needle} found in {hits:?}");
    }
    assert!(empty(&d.leftovers()));
}

const PREFIX_SUM: &str = "python2python/arena/prefix_sum";

/// The sizes of a one-dimensional task's hidden configurations (`(n,)`), from its file in the
/// set.
fn hidden_sizes(hidden: &Path, task: &str) -> Vec<u64> {
    let mut sizes = Vec::new();
    for e in std::fs::read_dir(hidden).unwrap().flatten() {
        if !e.file_name().to_string_lossy().contains(task) {
            continue;
        }
        let v: Value = serde_json::from_slice(&std::fs::read(e.path()).unwrap()).unwrap();
        for c in v["configs"].as_array().unwrap() {
            let entry = c["entry"].as_str().unwrap();
            sizes.push(entry.trim_matches(|c| "(,)".contains(c)).parse().unwrap());
        }
    }
    assert!(!sizes.is_empty(), "no hidden configurations of {task}");
    sizes
}
