//! The real agent CLIs (the pinned builds of images/claude-code.toml and images/codex.toml)
//! each run a whole scripted session against the endpoint, on this machine without a
//! container: they read a kernel file, write a new one and run a check with their own tools,
//! and the endpoint sees every request carry the key it was given. Needs the npm registry once
//! (the tarballs are kept in $ARENA_TARBALL_DIR, default ~/.cache/arena/tarballs).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use arena_endpoint::{Endpoint, Script};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The CLI at `inner` of `tgz`, the tarball `recipe` pins, fetched and unpacked into `dir`.
fn cli(recipe: &str, tgz: &str, inner: &str, dir: &Path) -> PathBuf {
    let tarballs = std::env::var_os("ARENA_TARBALL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/arena/tarballs")
        });
    let o = Command::new("bash")
        .arg(repo().join("ci/fetch-tarballs.sh"))
        .arg(repo().join(recipe))
        .arg(&tarballs)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = Command::new("tar")
        .args(["xzf"])
        .arg(tarballs.join(tgz))
        .arg("-C")
        .arg(dir)
        .arg(inner)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    dir.join(inner)
}

/// A workspace with a kernel to make faster and a check that prints `check: ok`, and a HOME
/// for the CLI: (workspace, kernel, home).
fn workspace(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let work = dir.join("work");
    std::fs::create_dir_all(work.join("source")).unwrap();
    let kernel = work.join("source/kernel.py");
    std::fs::write(&kernel, "def add_one(x):\n    return sum([x, 1])\n").unwrap();
    std::fs::write(
        work.join("check.py"),
        "import sys\nsys.path.insert(0, 'source')\nfrom kernel import add_one\n\
         assert add_one(41) == 42\nprint('check: ok')\n",
    )
    .unwrap();
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    (work, kernel, home)
}

const FASTER: &str = "def add_one(x):\n    return x + 1\n";

/// The endpoint on loopback, playing `script` (a session's TOML).
fn serve(script: &str) -> Endpoint {
    let script = Script::parse(script, "session.toml").unwrap();
    Endpoint::start(std::net::TcpListener::bind("127.0.0.1:0").unwrap(), script).unwrap()
}

/// Runs `cmd` to its end (at most 180 s); its stdout.
fn finish(cmd: &mut Command) -> String {
    let mut child = cmd
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
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The session ended as scripted: the CLI said the last turn's text, the kernel is the one it
/// wrote, every request to `api` carried `key`, and the last one answered the check's call
/// with what the check printed.
fn session_done(endpoint: &Endpoint, api: &str, key: &str, stdout: &str, kernel: &Path) {
    assert!(stdout.contains("check passes"), "{stdout}");
    assert_eq!(std::fs::read_to_string(kernel).unwrap(), FASTER);
    let seen = endpoint.requests();
    let turns: Vec<_> = seen.iter().filter(|r| r.path == api).collect();
    assert!(turns.len() >= 4, "{} requests", turns.len());
    assert!(seen.iter().all(|r| r.api_key.as_deref() == Some(key)));
    let last = turns.last().unwrap().body.to_string();
    assert!(
        last.contains("check: ok"),
        "{}",
        &last[last.len().saturating_sub(2000)..]
    );
}

#[test]
fn claude_code_edits_the_kernel_and_runs_the_check_with_its_own_tools() {
    let tmp = tempfile::tempdir().unwrap();
    let cli = cli(
        "images/claude-code.toml",
        "claude-code-linux-x64-2.1.332.tgz",
        "package/claude",
        tmp.path(),
    );
    let (work, kernel, home) = workspace(tmp.path());
    let script = format!(
            "[[turn]]\ntool = \"Read\"\ninput = {{ file_path = {k:?} }}\n\
             [[turn]]\ntool = \"Write\"\ninput = {{ file_path = {k:?}, content = {FASTER:?} }}\n\
             [[turn]]\ntool = \"Bash\"\ninput = {{ command = \"python3 check.py\", description = \"Run the check\" }}\n\
             [[turn]]\ntext = \"The kernel is faster and the check passes.\"\n",
            k = kernel.display().to_string()
    );
    let endpoint = serve(&script);
    let stdout = finish(
        Command::new(&cli)
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
            .env("DISABLE_AUTOUPDATER", "1"),
    );
    session_done(
        &endpoint,
        "/v1/messages",
        "sk-arena-canary-endpoint",
        &stdout,
        &kernel,
    );
}

#[test]
fn codex_edits_the_kernel_and_runs_the_check_with_its_own_shell() {
    let tmp = tempfile::tempdir().unwrap();
    let cli = cli(
        "images/codex.toml",
        "codex-0.171.0-linux-x64.tgz",
        "package/vendor/x86_64-unknown-linux-musl/bin/codex",
        tmp.path(),
    );
    let (work, kernel, home) = workspace(tmp.path());
    let write = format!("cat > source/kernel.py <<'EOF'\n{FASTER}EOF");
    let script = format!(
        "[[turn]]\ntool = \"exec_command\"\ninput = {{ cmd = \"cat source/kernel.py\" }}\n\
             [[turn]]\ntool = \"exec_command\"\ninput = {{ cmd = {write:?} }}\n\
             [[turn]]\ntool = \"exec_command\"\ninput = {{ cmd = \"python3 check.py\" }}\n\
             [[turn]]\ntext = \"The kernel is faster and the check passes.\"\n"
    );
    let endpoint = serve(&script);
    // The flags images/codex/bin/arena-codex passes.
    let provider = format!(
        "model_providers.arena={{name=\"arena\",base_url=\"http://{}/v1\",env_key=\"OPENAI_API_KEY\",wire_api=\"responses\"}}",
        endpoint.addr
    );
    let stdout = finish(
        Command::new(&cli)
            .args([
                "exec",
                "--skip-git-repo-check",
                "--dangerously-bypass-approvals-and-sandbox",
            ])
            .args(["-c", &provider, "-c", "model_provider=arena", "-m", "gpt-5"])
            .arg("Make source/kernel.py faster, then run python3 check.py.")
            .current_dir(&work)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", &home)
            .env("SHELL", "/bin/bash")
            .env("OPENAI_API_KEY", "sk-arena-canary-codex"),
    );
    session_done(
        &endpoint,
        "/v1/responses",
        "sk-arena-canary-codex",
        &stdout,
        &kernel,
    );
}
