//! What a run's events look like to whoever follows it: one line per event (what it means),
//! and, on a terminal, a progress bar for the run and a status line per task run.

use std::collections::BTreeMap;
use std::io::IsTerminal;

use arena_proto::v1::{EventKind, RunEvent};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

/// Progress: bars on a terminal, one line per event otherwise, nothing but errors for --json.
pub(super) struct View {
    multi: Option<MultiProgress>,
    overall: Option<ProgressBar>,
    bars: BTreeMap<String, ProgressBar>,
    quiet: bool,
}

fn mark(ok: bool) -> &'static str {
    if ok {
        "ok"
    } else {
        "FAIL"
    }
}

/// One line saying what an event means, or None for events not worth a line.
pub(super) fn describe(ev: &RunEvent) -> Option<String> {
    let k = EventKind::try_from(ev.kind).unwrap_or(EventKind::Unspecified);
    let detail = |m: &str| {
        if m.is_empty() {
            String::new()
        } else {
            format!(": {m}")
        }
    };
    Some(match k {
        // A run-level notice (a warning about the run as a whole).
        EventKind::TaskQueued if ev.task_id.is_empty() => ev.message.clone(),
        EventKind::TaskQueued => format!("queued{}", detail(&ev.message)),
        EventKind::TaskResumed => ev.message.clone(),
        EventKind::JobState => format!("slurm {}", ev.message),
        EventKind::ImageVerified => format!("gpu {} · image {}", ev.gpu, ev.message),
        EventKind::BaselineGate => format!(
            "baseline {} {}{}",
            ev.gate,
            mark(ev.passed),
            detail(&ev.message)
        ),
        EventKind::AgentStarted => format!("agent {} started", ev.message),
        EventKind::AgentFinished => format!("agent {}", ev.message),
        EventKind::EvaluatorGate => format!(
            "evaluator {} {}{}",
            ev.gate,
            mark(ev.passed),
            detail(&ev.message)
        ),
        EventKind::TaskResult if ev.result_json.contains("\"probe\"") => {
            let passed = serde_json::from_str::<serde_json::Value>(&ev.result_json)
                .ok()
                .and_then(|v| arena_run::result::parse_result(v).ok())
                .filter(|r| r.probe.is_some())
                .and_then(|r| r.unseen)
                .map(|u| u.original_passed);
            match passed {
                Some(p) => format!(
                    "probed: the original passes {} of {} configurations",
                    p.iter().filter(|b| **b).count(),
                    p.len()
                ),
                None => "probed".into(),
            }
        }
        EventKind::TaskResult => {
            // Scores are computed from the record, never stored in it.
            let scored = serde_json::from_str::<serde_json::Value>(&ev.result_json)
                .ok()
                .and_then(|v| arena_run::result::parse_result(v).ok())
                .map(|r| arena_report::score_task(&r));
            let (speedup, score) = scored.map_or((0.0, 0.0), |s| (s.speedup, s.score));
            let earlier = if ev.message.is_empty() {
                String::new()
            } else {
                format!(" ({})", ev.message)
            };
            format!("done: speedup {speedup:.2}x, score {score:.0}{earlier}")
        }
        EventKind::TaskError => format!("error: {}", ev.message),
        EventKind::RunDone | EventKind::RunCancelled => {
            if ev.message.is_empty() {
                return None;
            }
            return Some(ev.message.clone());
        }
        EventKind::Unspecified => return None,
    })
}

impl View {
    pub(super) fn new(json: bool, total: u64) -> View {
        let json = json || crate::progress::quiet();
        let tty = std::io::stderr().is_terminal() && !json;
        let (multi, overall) = if tty {
            let m = MultiProgress::new();
            let o = m.add(
                ProgressBar::new(total).with_style(
                    ProgressStyle::with_template(
                        "{elapsed_precise} [{bar:30}] {pos}/{len} task runs, ETA {eta} {msg}",
                    )
                    .expect("valid template")
                    .progress_chars("=> "),
                ),
            );
            (Some(m), Some(o))
        } else {
            (None, None)
        };
        View {
            multi,
            overall,
            bars: BTreeMap::new(),
            quiet: json,
        }
    }

    pub(super) fn note(&self, msg: &str) {
        match &self.multi {
            Some(m) => {
                let _ = m.println(msg);
            }
            None if !self.quiet => eprintln!("{msg}"),
            None => {}
        }
    }

    pub(super) fn event(&mut self, ev: &RunEvent) {
        let Some(line) = describe(ev) else { return };
        let who = format!("{}#{}", ev.task_id, ev.repeat);
        let kind = EventKind::try_from(ev.kind).unwrap_or(EventKind::Unspecified);
        let Some(multi) = &self.multi else {
            if ev.task_id.is_empty() {
                self.note(&line);
            } else {
                self.note(&format!("[{who}] {line}"));
            }
            return;
        };
        if ev.task_id.is_empty() {
            let _ = multi.println(line);
            return;
        }
        let bar = self.bars.entry(who.clone()).or_insert_with(|| {
            let b = multi.add(
                ProgressBar::new_spinner().with_style(
                    ProgressStyle::with_template("  {spinner} {prefix:48!} {msg}")
                        .expect("valid template"),
                ),
            );
            b.set_prefix(who.clone());
            b.enable_steady_tick(std::time::Duration::from_millis(200));
            b
        });
        if ev.gpu >= 0 && !bar.prefix().starts_with("gpu ") {
            // Once a GPU holds the task run, its line says which: one status line per GPU.
            bar.set_prefix(format!("gpu {} · {who}", ev.gpu));
        }
        bar.set_message(line.clone());
        if matches!(kind, EventKind::TaskResult | EventKind::TaskError) {
            bar.finish_with_message(line);
            if let Some(o) = &self.overall {
                o.inc(1);
            }
        }
    }

    pub(super) fn finish(&self) {
        if let Some(o) = &self.overall {
            o.finish();
        }
    }
}
