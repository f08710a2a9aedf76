//! The HTTP side: `POST /v1/messages` (whole or streamed), `/v1/messages/count_tokens` and
//! `POST /v1/responses`, served on a thread of its own until the [`Endpoint`] is dropped.

use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{json, Value};

use crate::script::{Script, Turn};
use crate::{messages, responses};

/// One request the endpoint answered.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub path: String,
    /// The key it carried (`x-api-key`, or a bearer token).
    pub api_key: Option<String>,
    pub body: Value,
}

#[derive(Clone)]
struct Shared {
    script: Arc<Script>,
    seen: Arc<Mutex<Vec<Recorded>>>,
}

/// A running endpoint; it stops when dropped.
pub struct Endpoint {
    pub addr: SocketAddr,
    seen: Arc<Mutex<Vec<Recorded>>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

fn key_of(headers: &HeaderMap) -> Option<String> {
    let text = |name| headers.get(name).and_then(|v| v.to_str().ok());
    text("x-api-key").map(str::to_string).or_else(|| {
        text(header::AUTHORIZATION.as_str())
            .and_then(|a| a.strip_prefix("Bearer "))
            .map(str::to_string)
    })
}

fn record(s: &Shared, uri: &Uri, headers: &HeaderMap, body: &Value) {
    s.seen.lock().unwrap().push(Recorded {
        path: uri.path().to_string(),
        api_key: key_of(headers),
        body: body.clone(),
    });
}

/// One API's way with a scripted turn: how it counts the turns a request holds, and the turn's
/// answer streamed and whole.
struct Api {
    turns_done: fn(&Value) -> usize,
    events: fn(&Turn, usize, &str) -> String,
    whole: fn(&Turn, usize, &str) -> Value,
}

const MESSAGES: Api = Api {
    turns_done: messages::turns_done,
    events: messages::events,
    whole: messages::message,
};

const RESPONSES: Api = Api {
    turns_done: responses::turns_done,
    events: responses::events,
    whole: responses::whole,
};

/// The script's next turn for `body`, in `api`'s shape (an event stream where it asked for
/// one).
fn turn_for(s: &Shared, api: &Api, body: &Value) -> Response {
    let done = (api.turns_done)(body);
    let turn = s.script.turn(done);
    let model = body
        .get("model")
        .and_then(|m| m.as_str())
        .unwrap_or("scripted");
    if body.get("stream").and_then(|v| v.as_bool()) == Some(true) {
        (
            [(header::CONTENT_TYPE, "text/event-stream")],
            (api.events)(&turn, done, model),
        )
            .into_response()
    } else {
        Json((api.whole)(&turn, done, model)).into_response()
    }
}

/// Every route the endpoint serves, recorded alike: `/v1/messages` (Anthropic's Messages API,
/// which Claude Code speaks), `/v1/responses` (OpenAI's Responses API, which Codex speaks) and
/// `/v1/messages/count_tokens`.
async fn answer(
    State(s): State<Shared>,
    uri: Uri,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    record(&s, &uri, &headers, &body);
    match uri.path() {
        "/v1/messages" => turn_for(&s, &MESSAGES, &body),
        "/v1/responses" => turn_for(&s, &RESPONSES, &body),
        _ => Json(json!({"input_tokens": 1})).into_response(),
    }
}

async fn elsewhere(uri: Uri) -> Response {
    let e = json!({"type": "error", "error": {"type": "not_found_error",
                   "message": format!("{} is not served by arena's scripted endpoint", uri.path())}});
    (StatusCode::NOT_FOUND, Json(e)).into_response()
}

impl Endpoint {
    /// Serves `script` on `listener` (bound by the caller: where it was bound, a network
    /// namespace included, is where it serves).
    pub fn start(listener: TcpListener, script: Script) -> std::io::Result<Endpoint> {
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let seen = Arc::new(Mutex::new(Vec::new()));
        let shared = Shared {
            script: Arc::new(script),
            seen: seen.clone(),
        };
        let app = Router::new()
            .route("/v1/messages", post(answer))
            .route("/v1/messages/count_tokens", post(answer))
            .route("/v1/responses", post(answer))
            .fallback(elsewhere)
            .with_state(shared);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let thread = std::thread::spawn(move || {
            rt.block_on(async move {
                let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                    return;
                };
                let _ = axum::serve(listener, app)
                    .with_graceful_shutdown(async {
                        let _ = stopped.await;
                    })
                    .await;
            })
        });
        Ok(Endpoint {
            addr,
            seen,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// Binds `addr` inside the network namespace at `netns` (for example
    /// `/run/netns/NAME`) from a thread that enters it, then serves there: the socket stays in
    /// that namespace, and this process's own network is not touched.
    pub fn start_in_netns(
        netns: &std::path::Path,
        addr: SocketAddr,
        script: Script,
    ) -> std::io::Result<Endpoint> {
        let ns = std::fs::File::open(netns)?;
        let listener = std::thread::spawn(move || -> std::io::Result<TcpListener> {
            nix::sched::setns(&ns, nix::sched::CloneFlags::CLONE_NEWNET)
                .map_err(std::io::Error::from)?;
            TcpListener::bind(addr)
        })
        .join()
        .map_err(|_| std::io::Error::other("the thread entering the namespace panicked"))??;
        Endpoint::start(listener, script)
    }

    /// Every request answered so far, in order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
