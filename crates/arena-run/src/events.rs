//! A run's progress events: kept in order (a watcher that joins late gets the history first)
//! and broadcast live to every watcher.

use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use arena_proto::v1::{EventKind, RunEvent};
use tokio::sync::broadcast;

use crate::rundir::Item;

pub struct Events {
    history: Mutex<Vec<RunEvent>>,
    live: broadcast::Sender<RunEvent>,
}

impl Default for Events {
    fn default() -> Self {
        Events {
            history: Mutex::new(Vec::new()),
            live: broadcast::channel(4096).0,
        }
    }
}

/// What an event says besides its kind and task run.
#[derive(Debug, Default, Clone)]
pub struct Detail {
    pub gpu: Option<u32>,
    pub gate: String,
    pub passed: bool,
    pub message: String,
    pub result_json: String,
}

impl Events {
    pub fn emit(&self, kind: EventKind, item: Option<&Item>, d: Detail) {
        let mut h = self.history.lock().unwrap();
        let ev = RunEvent {
            seq: h.len() as u64,
            kind: kind as i32,
            task_id: item.map(|i| i.task_id.clone()).unwrap_or_default(),
            repeat: item.map(|i| i.repeat).unwrap_or(0),
            gpu: d.gpu.map(|g| g as i32).unwrap_or(-1),
            gate: d.gate,
            passed: d.passed,
            message: d.message,
            result_json: d.result_json,
            time: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_secs_f64())
                .unwrap_or(0.0),
        };
        h.push(ev.clone());
        // No watcher is not an error: the history keeps the event.
        let _ = self.live.send(ev);
    }

    pub fn message(&self, kind: EventKind, item: Option<&Item>, message: impl Into<String>) {
        self.emit(
            kind,
            item,
            Detail {
                message: message.into(),
                ..Default::default()
            },
        )
    }

    /// The events so far and a receiver of every later one (taken under the same lock, so
    /// none is missed or seen twice).
    pub fn subscribe(&self) -> (Vec<RunEvent>, broadcast::Receiver<RunEvent>) {
        let h = self.history.lock().unwrap();
        (h.clone(), self.live.subscribe())
    }
}

pub fn is_terminal(ev: &RunEvent) -> bool {
    ev.kind == EventKind::RunDone as i32 || ev.kind == EventKind::RunCancelled as i32
}
