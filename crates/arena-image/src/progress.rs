//! Progress reporting without a UI dependency: the CLI plugs in progress bars, tests and
//! libraries use [`NoProgress`].

pub trait Progress: Sync {
    /// A new phase (`hashing`, `compressing`, `exporting`, …) with a total in bytes if known.
    fn phase(&self, _label: &str, _total: Option<u64>) {}
    fn advance(&self, _bytes: u64) {}
    fn finish_phase(&self) {}
    /// A one-line note (an image built or reused).
    fn note(&self, _message: &str) {}
}

pub struct NoProgress;

impl Progress for NoProgress {}
