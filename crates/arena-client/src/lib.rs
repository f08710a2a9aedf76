//! A client of the arena runner (`arena.v1.Runner`): connect to a runner on this machine (its
//! unix socket: the kernel names the caller) or over TCP (a bearer token), and evaluate a
//! candidate of a task in one call — what a training loop or a search calls thousands of times
//! an hour:
//!
//! ```no_run
//! # async fn f(src: Vec<u8>) -> Result<(), arena_client::ClientError> {
//! use arena_client::{Evaluate, Runner};
//! let r = Runner::connect("unix:/run/arena/runner.sock").await?
//!     .evaluate(Evaluate::new("lockfiles/kb.lock", "kernelbench/level1/19_ReLU").file("source/model_new.py", src))
//!     .await?;
//! println!("score {} (speedup {:.3})", r.score.score, r.score.speedup);
//! # Ok(()) }
//! ```
//!
//! The answer is the task result a run would record for the same candidate (gates, paired
//! times, trust, every digest it depends on) with its score by the AgentKernelArena paper's
//! rule. A runner that is busy answers at once (`ClientError::Busy`): wait and ask again.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use arena_proto::v1::runner_client::RunnerClient;
use arena_proto::v1::EvaluateRequest;
use arena_report::TaskScore;
use arena_run::result::TaskResult;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("connecting to the runner at {addr}: {why}")]
    Connect { addr: String, why: String },
    #[error("{path}: {why}")]
    Token { path: PathBuf, why: String },
    /// The runner's queue is full: nothing was evaluated; ask again later.
    #[error("the runner is busy: {0}")]
    Busy(String),
    #[error("{}: {}", .0.code(), .0.message())]
    Status(tonic::Status),
    #[error("the runner's answer: {0}")]
    Answer(String),
}

impl From<tonic::Status> for ClientError {
    fn from(s: tonic::Status) -> Self {
        if s.code() == tonic::Code::ResourceExhausted {
            ClientError::Busy(s.message().to_string())
        } else {
            ClientError::Status(s)
        }
    }
}

/// Adds the caller's bearer token (if any) to every request.
#[derive(Clone)]
pub struct Bearer(Option<MetadataValue<Ascii>>);

impl tonic::service::Interceptor for Bearer {
    fn call(&mut self, mut req: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(v) = &self.0 {
            req.metadata_mut().insert("authorization", v.clone());
        }
        Ok(req)
    }
}

/// The generated client, with the caller's token on every request.
pub type Client = RunnerClient<InterceptedService<Channel, Bearer>>;

/// The token file of a client: `flag`, else `ARENA_RUNNER_TOKEN_FILE`.
pub fn token_file(flag: Option<&Path>) -> Option<PathBuf> {
    flag.map(Path::to_path_buf)
        .or_else(|| std::env::var_os("ARENA_RUNNER_TOKEN_FILE").map(PathBuf::from))
}

/// A client of the runner at `addr`: `unix:PATH`, or `http://HOST:PORT` with the token in
/// `token_file` (one token, nothing else).
pub async fn connect(addr: &str, token_file: Option<&Path>) -> Result<Client, ClientError> {
    let bearer = match token_file {
        Some(f) => {
            let bad = |why: String| ClientError::Token {
                path: f.to_path_buf(),
                why,
            };
            let t = std::fs::read_to_string(f)
                .map_err(|e| bad(format!("reading the token file: {e}")))?;
            let t = t.trim();
            if t.is_empty() || t.contains(char::is_whitespace) {
                return Err(bad("expected one token and nothing else".into()));
            }
            Some(
                format!("Bearer {t}")
                    .parse()
                    .map_err(|_| bad("the token is not printable ASCII".into()))?,
            )
        }
        None => None,
    };
    let failed = |why: String| ClientError::Connect {
        addr: addr.to_string(),
        why,
    };
    let channel = if let Some(path) = addr.strip_prefix("unix:") {
        let path = PathBuf::from(path.trim_start_matches("//"));
        // The URI is a placeholder: every connection goes to the socket.
        Endpoint::try_from("http://runner.invalid")
            .map_err(|e| failed(e.to_string()))?
            .connect_with_connector(tower::service_fn(move |_| {
                let path = path.clone();
                async move {
                    let s = tokio::net::UnixStream::connect(&path).await?;
                    Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(s))
                }
            }))
            .await
    } else {
        if bearer.is_none() {
            return Err(failed(
                "a runner over TCP needs a bearer token: --token-file FILE (or \
                 ARENA_RUNNER_TOKEN_FILE); a runner on this machine: unix:PATH"
                    .into(),
            ));
        }
        Endpoint::try_from(addr.to_string())
            .map_err(|e| failed(e.to_string()))?
            .connect()
            .await
    }
    .map_err(|e| failed(with_causes(&e)))?;
    Ok(RunnerClient::with_interceptor(channel, Bearer(bearer)))
}

/// `e` and each of its causes once: tonic's "transport error" alone hides the OS's reason
/// (no such socket, connection refused).
fn with_causes(e: &dyn std::error::Error) -> String {
    let mut line = e.to_string();
    let mut next = e.source();
    while let Some(cause) = next {
        let c = cause.to_string();
        if !line.contains(&c) {
            line = format!("{line}: {c}");
        }
        next = cause.source();
    }
    line
}

/// One candidate of one task to evaluate.
#[derive(Debug, Clone, Default)]
pub struct Evaluate {
    pub image_lock: PathBuf,
    pub task: String,
    pub files: BTreeMap<String, Vec<u8>>,
    pub request_id: String,
    pub timeout: Option<Duration>,
    /// Pairs of timed batches per configuration (None: the runner's default).
    pub trusted_pairs: Option<u32>,
    /// Outputs of each timed batch checked on a GPU (None: the runner's default, 64).
    pub checked_calls: Option<u32>,
}

impl Evaluate {
    /// The task `task` (an id, or its locked digest `sha256:…`) of the lockfile `image_lock`
    /// (a path on the runner's machine).
    pub fn new(image_lock: impl Into<PathBuf>, task: impl Into<String>) -> Evaluate {
        Evaluate {
            image_lock: image_lock.into(),
            task: task.into(),
            ..Default::default()
        }
    }

    /// One of the task's agent files (a task-relative path) with the candidate's content.
    pub fn file(mut self, path: impl Into<String>, content: impl Into<Vec<u8>>) -> Evaluate {
        self.files.insert(path.into(), content.into());
        self
    }

    /// The caller's name for the request, echoed in the answer.
    pub fn request_id(mut self, id: impl Into<String>) -> Evaluate {
        self.request_id = id.into();
        self
    }

    /// How long the evaluation may take, queueing included.
    pub fn timeout(mut self, t: Duration) -> Evaluate {
        self.timeout = Some(t);
        self
    }

    /// Pairs of timed batches per configuration (1 to 100): fewer answer sooner, noisier.
    pub fn trusted_pairs(mut self, pairs: u32) -> Evaluate {
        self.trusted_pairs = Some(pairs);
        self
    }

    /// Outputs of each timed batch checked against the reference on a GPU, a secret sample
    /// (0: every one; at most 4096).
    pub fn checked_calls(mut self, n: u32) -> Evaluate {
        self.checked_calls = Some(n);
        self
    }

    fn into_request(self) -> tonic::Request<EvaluateRequest> {
        let mut req = tonic::Request::new(EvaluateRequest {
            image_lock: self.image_lock.display().to_string(),
            task: self.task,
            files: self.files.into_iter().collect(),
            request_id: self.request_id,
            timeout_ms: self
                .timeout
                .map(|t| t.as_millis().min(u32::MAX as u128) as u32)
                .unwrap_or(0),
            trusted_pairs: self.trusted_pairs,
            checked_calls: self.checked_calls,
        });
        if let Some(t) = self.timeout {
            // The call's own deadline too, a little later: the runner answers
            // DEADLINE_EXCEEDED itself first.
            req.set_timeout(t + Duration::from_secs(5));
        }
        req
    }
}

/// What the runner answered.
#[derive(Debug, Clone)]
pub struct Evaluation {
    pub request_id: String,
    pub evaluation_id: String,
    /// The task result record (`arena.task_result/v2`).
    pub result: TaskResult,
    /// Its score, by the paper's rule (20·compiled + 100·correct + 100·speedup·correct).
    pub score: TaskScore,
    pub queue_ms: f64,
    pub evaluate_ms: f64,
    /// Whether an evaluator of the task was already running.
    pub warm: bool,
    /// The result as the runner sent it.
    pub result_json: String,
}

/// A connected runner.
#[derive(Clone)]
pub struct Runner {
    client: Client,
}

impl Runner {
    /// The runner at `addr` (`unix:PATH`, or `http://HOST:PORT` with the token file named by
    /// `ARENA_RUNNER_TOKEN_FILE`).
    pub async fn connect(addr: &str) -> Result<Runner, ClientError> {
        Runner::connect_with(addr, token_file(None).as_deref()).await
    }

    pub async fn connect_with(
        addr: &str,
        token_file: Option<&Path>,
    ) -> Result<Runner, ClientError> {
        Ok(Runner {
            client: connect(addr, token_file).await?,
        })
    }

    /// The generated client, for the other calls.
    pub fn client(&mut self) -> &mut Client {
        &mut self.client
    }

    /// Evaluates a candidate; its result and score.
    pub async fn evaluate(&self, e: Evaluate) -> Result<Evaluation, ClientError> {
        let r = self
            .client
            .clone()
            .evaluate(e.into_request())
            .await?
            .into_inner();
        let value: serde_json::Value =
            serde_json_from(&r.result_json).map_err(ClientError::Answer)?;
        let result = arena_run::result::parse_result(value).map_err(ClientError::Answer)?;
        Ok(Evaluation {
            score: arena_report::score_task(&result),
            request_id: r.request_id,
            evaluation_id: r.evaluation_id,
            result,
            queue_ms: r.queue_ms,
            evaluate_ms: r.evaluate_ms,
            warm: r.warm,
            result_json: r.result_json,
        })
    }
}

fn serde_json_from(text: &str) -> Result<serde_json::Value, String> {
    serde_json::from_str(text).map_err(|e| e.to_string())
}
