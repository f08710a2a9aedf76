//! The real Claude Code CLI (the pinned native build of images/claude-code.toml) runs a whole
//! scripted session against the endpoint, on this machine without a container: it reads a
//! kernel file, writes a new one and runs a check with its own tools, and the endpoint sees
//! every request carry the key it was given. Needs the npm registry once (the tarball is kept
//! in $ARENA_TARBALL_DIR, default ~/.cache/arena/tarballs).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use arena_endpoint::{Endpoint, Script};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The CLI of images/claude-code.toml, fetched (pinned) and unpacked into `dir`.
fn claude(dir: &Path) -> PathBuf {
    let tarballs = std::env::var_os("ARENA_TARBALL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/arena/tarballs")
        });
    let o = Command::new("bash")
        .arg(repo().join("ci/fetch-tarballs.sh"))
        .arg(repo().join("images/claude-code.toml"))
        .arg(&tarballs)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let tgz = tarballs.join("claude-code-linux-x64-2.1.332.tgz");
    let o = Command::new("tar")
        .args(["xzf"])
        .arg(&tgz)
        .arg("-C")
        .arg(dir)
        .arg("package/claude")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    dir.join("package/claude")
}

#[test]
fn the_real_cli_edits_the_kernel_and_runs_the_check_with_its_own_tools() {
    let tmp = tempfile::tempdir().unwrap();
    let cli = claude(tmp.path());
    let work = tmp.path().join("work");
    std::fs::create_dir_all(work.join("source")).unwrap();
    let kernel = work.join("source/kernel.py");
    std::fs::write(&kernel, "def add_one(x):\n    return sum([x, 1])\n").unwrap();
    std::fs::write(
        work.join("check.py"),
        "import sys\nsys.path.insert(0, 'source')\nfrom kernel import add_one\n\
         assert add_one(41) == 42\nprint('check: ok')\n",
    )
    .unwrap();
    let faster = "def add_one(x):\n    return x + 1\n";
    let script = Script::parse(
        &format!(
            "[[turn]]\ntool = \"Read\"\ninput = {{ file_path = {k:?} }}\n\
             [[turn]]\ntool = \"Write\"\ninput = {{ file_path = {k:?}, content = {faster:?} }}\n\
             [[turn]]\ntool = \"Bash\"\ninput = {{ command = \"python3 check.py\", description = \"Run the check\" }}\n\
             [[turn]]\ntext = \"The kernel is faster and the check passes.\"\n",
            k = kernel.display().to_string()
        ),
        "session.toml",
    )
    .unwrap();
    let endpoint =
        Endpoint::start(std::net::TcpListener::bind("127.0.0.1:0").unwrap(), script).unwrap();
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let mut child = Command::new(&cli)
        .args([
            "-p",
            "Make source/kernel.py faster, then run python3 check.py.",
        ])
        .args([
            "--max-turns",
            "10",
            "--allowedTools",
            "Read,Edit,Write,Bash",
        ])
        .current_dir(&work)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", &home)
        .env("SHELL", "/bin/bash")
        .env("ANTHROPIC_BASE_URL", format!("http://{}", endpoint.addr))
        .env("ANTHROPIC_API_KEY", "sk-arena-canary-endpoint")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(180);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("the CLI did not finish in 180 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("check passes"), "{stdout}");
    assert_eq!(std::fs::read_to_string(&kernel).unwrap(), faster);
    let seen = endpoint.requests();
    let turns: Vec<_> = seen.iter().filter(|r| r.path == "/v1/messages").collect();
    assert!(turns.len() >= 4, "{} requests", turns.len());
    assert!(seen
        .iter()
        .all(|r| r.api_key.as_deref() == Some("sk-arena-canary-endpoint")));
    // The last request answers the Bash call with what the check printed.
    let last = turns.last().unwrap().body.to_string();
    assert!(
        last.contains("check: ok"),
        "{}",
        &last[last.len().saturating_sub(2000)..]
    );
}
