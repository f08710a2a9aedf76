//! indicatif progress bars behind arena-image's Progress trait. Bars go to stderr and only
//! when it is a terminal; notes always go to stderr (stdout stays clean for --json).

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use indicatif::{ProgressBar, ProgressStyle};

/// `-q`: no progress bars, no notes.
static QUIET: AtomicBool = AtomicBool::new(false);

pub fn set_quiet(q: bool) {
    QUIET.store(q, Ordering::Relaxed);
}

/// Whether `-q` was given.
pub fn quiet() -> bool {
    QUIET.load(Ordering::Relaxed)
}

pub struct Bars {
    bar: Mutex<Option<ProgressBar>>,
    enabled: bool,
    quiet: bool,
}

impl Bars {
    /// `quiet` suppresses notes too (for --json).
    pub fn new(quiet: bool) -> Bars {
        let quiet = quiet || self::quiet();
        Bars {
            bar: Mutex::new(None),
            enabled: std::io::stderr().is_terminal() && !quiet,
            quiet,
        }
    }
}

impl arena_image::Progress for Bars {
    fn phase(&self, label: &str, total: Option<u64>) {
        if !self.enabled {
            return;
        }
        let bar = match total {
            Some(t) => ProgressBar::new(t).with_style(
                ProgressStyle::with_template(
                    "{msg:40!} [{bar:30}] {bytes}/{total_bytes} {binary_bytes_per_sec} eta {eta}",
                )
                .expect("valid template")
                .progress_chars("=> "),
            ),
            None => ProgressBar::new_spinner().with_style(
                ProgressStyle::with_template("{spinner} {msg} {bytes} {binary_bytes_per_sec}")
                    .expect("valid template"),
            ),
        };
        bar.set_message(label.to_string());
        bar.enable_steady_tick(std::time::Duration::from_millis(120));
        if let Some(old) = self.bar.lock().unwrap().replace(bar) {
            old.finish_and_clear();
        }
    }

    fn advance(&self, bytes: u64) {
        if let Some(b) = self.bar.lock().unwrap().as_ref() {
            b.inc(bytes);
        }
    }

    fn finish_phase(&self) {
        if let Some(b) = self.bar.lock().unwrap().take() {
            b.finish_and_clear();
        }
    }

    fn note(&self, message: &str) {
        if self.quiet {
            return;
        }
        match self.bar.lock().unwrap().as_ref() {
            Some(b) => b.println(message),
            None => eprintln!("{message}"),
        }
    }
}
