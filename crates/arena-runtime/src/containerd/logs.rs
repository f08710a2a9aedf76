//! stdout/stderr capture: the shim writes into FIFOs we create; a reader thread copies up to a
//! cap into the log file and keeps draining (and counting) past it, so a chatty process can
//! neither fill the disk nor block on a full pipe.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use crate::boundary::Captured;
use crate::error::{Result, RuntimeError};

pub fn mkfifo(path: &Path) -> Result<()> {
    nix::unistd::mkfifo(
        path,
        nix::sys::stat::Mode::S_IRUSR | nix::sys::stat::Mode::S_IWUSR,
    )
    .map_err(|e| RuntimeError::io(path, std::io::Error::from(e)))
}

pub struct Capture {
    fifo: PathBuf,
    handle: Option<std::thread::JoinHandle<std::io::Result<Captured>>>,
}

impl Capture {
    /// Creates the FIFO and starts the reader (which waits for the shim to open the FIFO).
    pub fn start(fifo: PathBuf, log: PathBuf, cap: u64) -> Result<Capture> {
        mkfifo(&fifo)?;
        let f2 = fifo.clone();
        let handle = std::thread::spawn(move || -> std::io::Result<Captured> {
            let mut input = std::fs::File::open(&f2)?;
            let mut out = std::fs::File::create(&log)?;
            let mut buf = vec![0u8; 64 * 1024];
            let mut c = Captured::default();
            loop {
                let n = input.read(&mut buf)?;
                if n == 0 {
                    break;
                }
                let room = cap.saturating_sub(c.written) as usize;
                let take = room.min(n);
                if take > 0 {
                    out.write_all(&buf[..take])?;
                    c.written += take as u64;
                }
                c.total += n as u64;
            }
            Ok(c)
        });
        Ok(Capture {
            fifo,
            handle: Some(handle),
        })
    }

    pub fn fifo(&self) -> &Path {
        &self.fifo
    }

    /// Waits for the writer side to close (the task was deleted). If the shim never opened the
    /// FIFO (task creation failed), opening it ourselves releases the reader.
    pub fn finish(mut self) -> Captured {
        let Some(h) = self.handle.take() else {
            return Captured::default();
        };
        // Until the reader is done, keep a writer appearing now and then: opening a FIFO
        // read-write never blocks and releases a reader blocked in open(), whether it got
        // there before us or gets there later. Bounded: a reader still busy after 60 s has a
        // writer that is still alive somewhere, and is left to finish on its own.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !h.is_finished() && std::time::Instant::now() < deadline {
            let w = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(&self.fifo);
            std::thread::sleep(std::time::Duration::from_millis(5));
            drop(w);
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        if !h.is_finished() {
            let _ = std::fs::remove_file(&self.fifo);
            return Captured::default();
        }
        let c = h.join().ok().and_then(|r| r.ok()).unwrap_or_default();
        let _ = std::fs::remove_file(&self.fifo);
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_and_counts() {
        let d = tempfile::tempdir().unwrap();
        let cap = Capture::start(d.path().join("f"), d.path().join("log"), 10).unwrap();
        let mut w = std::fs::OpenOptions::new()
            .write(true)
            .open(cap.fifo())
            .unwrap();
        w.write_all(&[b'x'; 100]).unwrap();
        drop(w);
        let c = cap.finish();
        assert_eq!(
            c,
            Captured {
                written: 10,
                total: 100
            }
        );
        assert!(c.truncated());
        assert_eq!(std::fs::read(d.path().join("log")).unwrap().len(), 10);
        assert!(!d.path().join("f").exists());
    }

    #[test]
    fn a_writer_that_never_came_does_not_hang() {
        let d = tempfile::tempdir().unwrap();
        let cap = Capture::start(d.path().join("f"), d.path().join("log"), 10).unwrap();
        assert_eq!(cap.finish(), Captured::default());
    }
}
