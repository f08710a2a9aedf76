//! Slurm through its commands: `sbatch` to submit, `squeue` to follow, `scancel` to stop. The
//! [`SlurmCli`] trait is what the backend needs; [`SlurmCommands`] runs the real commands
//! (with the caller's `SLURM_CONF`), and tests of the follow loop use a double.

use std::io::Write;
use std::process::{Command, Stdio};

use crate::error::{Result, SlurmError};

/// A job's state as squeue prints it (`%T`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobState {
    Pending,
    Configuring,
    Running,
    Completing,
    Completed,
    Failed,
    Cancelled,
    Timeout,
    NodeFail,
    Preempted,
    OutOfMemory,
    Other(String),
}

impl JobState {
    pub fn parse(s: &str) -> JobState {
        match s.trim() {
            "PENDING" => JobState::Pending,
            "CONFIGURING" => JobState::Configuring,
            "RUNNING" => JobState::Running,
            "COMPLETING" => JobState::Completing,
            "COMPLETED" => JobState::Completed,
            "FAILED" => JobState::Failed,
            "CANCELLED" => JobState::Cancelled,
            "TIMEOUT" => JobState::Timeout,
            "NODE_FAIL" => JobState::NodeFail,
            "PREEMPTED" => JobState::Preempted,
            "OUT_OF_MEMORY" => JobState::OutOfMemory,
            other => JobState::Other(other.to_string()),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            JobState::Pending => "PENDING",
            JobState::Configuring => "CONFIGURING",
            JobState::Running => "RUNNING",
            JobState::Completing => "COMPLETING",
            JobState::Completed => "COMPLETED",
            JobState::Failed => "FAILED",
            JobState::Cancelled => "CANCELLED",
            JobState::Timeout => "TIMEOUT",
            JobState::NodeFail => "NODE_FAIL",
            JobState::Preempted => "PREEMPTED",
            JobState::OutOfMemory => "OUT_OF_MEMORY",
            JobState::Other(s) => s,
        }
    }

    /// Whether the job may still run or is running (so a restarted head must not submit
    /// another job for its task run). A suspended or requeued job counts as live.
    pub fn is_live(&self) -> bool {
        match self {
            JobState::Pending
            | JobState::Configuring
            | JobState::Running
            | JobState::Completing => true,
            JobState::Other(s) => matches!(
                s.as_str(),
                "SUSPENDED"
                    | "REQUEUED"
                    | "REQUEUE_HOLD"
                    | "REQUEUE_FED"
                    | "RESIZING"
                    | "SIGNALING"
                    | "STAGE_OUT"
            ),
            _ => false,
        }
    }
}

/// One line of `squeue -o '%i|%j|%T|%r'`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobInfo {
    pub id: String,
    pub name: String,
    pub state: JobState,
    /// Slurm's reason (`None`, `Priority`, `NonZeroExitCode`, `TimeLimit`, …).
    pub reason: String,
}

pub const SQUEUE_FORMAT: &str = "%i|%j|%T|%r";

/// Parses squeue output in [`SQUEUE_FORMAT`]; a name may itself contain `|`.
pub fn parse_squeue(text: &str) -> Vec<JobInfo> {
    text.lines()
        .filter_map(|l| {
            let (id, rest) = l.trim().split_once('|')?;
            let (rest, reason) = rest.rsplit_once('|')?;
            let (name, state) = rest.rsplit_once('|')?;
            Some(JobInfo {
                id: id.to_string(),
                name: name.to_string(),
                state: JobState::parse(state),
                reason: reason.to_string(),
            })
        })
        .collect()
}

pub trait SlurmCli: Send + Sync {
    /// Submits a batch script; returns the job id.
    fn submit(&self, args: &[String], script: &str) -> Result<String>;
    /// This user's jobs Slurm still knows, finished ones included.
    fn jobs(&self) -> Result<Vec<JobInfo>>;
    fn cancel(&self, ids: &[String]) -> Result<()>;
}

/// The real commands, found on `PATH`.
#[derive(Debug, Clone, Default)]
pub struct SlurmCommands;

fn run(cmd: &mut Command, what: &str, stdin: Option<&str>) -> Result<String> {
    let fail = |message: String| SlurmError::Command {
        command: what.to_string(),
        message,
    };
    let mut child = cmd
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| fail(format!("{e} (is Slurm's client installed and on PATH?)")))?;
    if let Some(input) = stdin {
        let mut w = child.stdin.take().expect("piped");
        w.write_all(input.as_bytes())
            .map_err(|e| fail(e.to_string()))?;
    }
    let out = child.wait_with_output().map_err(|e| fail(e.to_string()))?;
    if !out.status.success() {
        return Err(fail(format!(
            "{}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

impl SlurmCli for SlurmCommands {
    fn submit(&self, args: &[String], script: &str) -> Result<String> {
        let out = run(Command::new("sbatch").args(args), "sbatch", Some(script))?;
        // `--parsable` prints `ID` or `ID;CLUSTER`.
        let id = out.trim().split(';').next().unwrap_or("").to_string();
        if id.is_empty() || !id.chars().all(|c| c.is_ascii_digit() || c == '_') {
            return Err(SlurmError::Command {
                command: "sbatch".into(),
                message: format!("unexpected output {:?}", out.trim()),
            });
        }
        Ok(id)
    }

    fn jobs(&self) -> Result<Vec<JobInfo>> {
        let out = run(
            Command::new("squeue").args(["--me", "-h", "--states=all", "-o", SQUEUE_FORMAT]),
            "squeue",
            None,
        )?;
        Ok(parse_squeue(&out))
    }

    fn cancel(&self, ids: &[String]) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        run(Command::new("scancel").args(ids), "scancel", None).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn squeue_lines_and_states() {
        let jobs = parse_squeue(
            "1|arena.r1.a/b/c.r0|COMPLETED|None\n2|odd|name|PENDING|Priority\n3|x|TIMEOUT|TimeLimit\n\n",
        );
        assert_eq!(jobs.len(), 3);
        assert_eq!(jobs[1].name, "odd|name");
        assert_eq!(jobs[1].state, JobState::Pending);
        assert!(jobs[1].state.is_live());
        assert!(!jobs[0].state.is_live());
        assert_eq!(jobs[2].state, JobState::Timeout);
        assert_eq!(jobs[2].reason, "TimeLimit");
        assert!(JobState::parse("SUSPENDED").is_live());
        assert_eq!(JobState::parse("BOOT_FAIL").as_str(), "BOOT_FAIL");
        assert!(!JobState::parse("BOOT_FAIL").is_live());
    }
}
