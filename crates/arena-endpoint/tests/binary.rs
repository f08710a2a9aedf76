//! The `arena-endpoint` binary (what ci/gpu/lab-first-run.sh serves a session with): it answers
//! the script's turns, and on SIGTERM writes every request it answered, key included, before it
//! exits; a script it cannot read is refused, naming the file.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

fn binary() -> Command {
    Command::new(env!("CARGO_BIN_EXE_arena-endpoint"))
}

/// One HTTP/1.1 POST of `body` to `path`, its whole answer as text.
fn post(port: u16, path: &str, key: &str, body: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut s = loop {
        match TcpStream::connect(("127.0.0.1", port)) {
            Ok(s) => break s,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => panic!("the endpoint never listened: {e}"),
        }
    };
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: x\r\nx-api-key: {key}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    answer
}

#[test]
fn the_binary_serves_the_script_and_writes_what_it_answered_on_sigterm() {
    let tmp = tempfile::tempdir().unwrap();
    let script = tmp.path().join("s.toml");
    std::fs::write(&script, "[[turn]]\ntext = \"scripted-answer-7\"\n").unwrap();
    let record = tmp.path().join("record.jsonl");
    // A port the kernel just handed out and took back: free, barring a race with nothing here.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = binary()
        .arg("--script")
        .arg(&script)
        .args(["--listen", &format!("127.0.0.1:{port}"), "--record"])
        .arg(&record)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let body = r#"{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"go"}]}"#;
    let answer = post(port, "/v1/messages", "sk-binary-canary", body);
    assert!(answer.contains("scripted-answer-7"), "{answer}");
    kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).unwrap();
    let status = child.wait().unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(status.success(), "{status}: {err}");
    assert!(err.contains("1 requests recorded"), "{err}");
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&record)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["path"], "/v1/messages");
    assert_eq!(lines[0]["api_key"], "sk-binary-canary");
    assert_eq!(lines[0]["body"]["messages"][0]["content"], "go");
}

#[test]
fn a_script_it_cannot_read_is_refused_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp.path().join("bad.toml");
    std::fs::write(&bad, "[[turn]]\nwhat = 1\n").unwrap();
    for (script, why) in [
        (tmp.path().join("missing.toml"), "missing.toml"),
        (bad.clone(), "bad.toml"),
    ] {
        let o = binary()
            .arg("--script")
            .arg(&script)
            .args(["--listen", "127.0.0.1:0", "--record"])
            .arg(tmp.path().join("r.jsonl"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(err.contains(why), "{err}");
        assert!(!tmp.path().join("r.jsonl").exists());
    }
}
