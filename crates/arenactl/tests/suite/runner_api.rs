//! The runner's API against real `arenactl runner serve` processes and a real containerd:
//! callers are named (unix socket: the kernel's word; TCP: bearer tokens) or refused, a run
//! belongs to its submitter, and the paths and mounts a caller names are checked against what
//! it may do. Other local users are played with setpriv. Needs root, containerd and runc.

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::daemon::*;
use common::repo;

const PREFIX_SUM: &str = "python2python/arena/prefix_sum";
/// nobody:nogroup, a member of the socket's group; 65533 is in no group of the runner's.
const NOBODY: u32 = 65534;
const STRANGER: u32 = 65533;

/// A runner serving until dropped.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn serve(d: &Daemon, listen: &str, extra: &[&str]) -> Server {
    let child = arenactl()
        .args(["runner", "serve", "--listen", listen, "--gpus", "cpu:1"])
        .args(["--containerd", &d.socket, "--store"])
        .arg(store())
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    Server(child)
}

/// Waits until `probe` succeeds (the server is up).
fn until(what: &str, mut probe: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !probe() {
        assert!(t0.elapsed() < Duration::from_secs(60), "{what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `arenactl ARGS` as `uid` (gid the same, no other groups) through a copy of the binary
/// every user may run.
fn as_user(bin: &Path, uid: u32, args: &[&str]) -> Output {
    Command::new("setpriv")
        .args([
            &format!("--reuid={uid}"),
            &format!("--regid={uid}"),
            "--clear-groups",
        ])
        .arg(bin)
        .args(args)
        .current_dir("/")
        .output()
        .unwrap()
}

/// A world-readable, world-enterable copy of arenactl and a directory for the test.
fn shared_dir(d: &Daemon) -> (PathBuf, PathBuf) {
    let dir = d.dir.path().join("shared");
    std::fs::create_dir_all(&dir).unwrap();
    for p in [d.dir.path(), dir.as_path()] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let bin = dir.join("arenactl");
    // Copied by `cp`, not by this process: a write descriptor open here can be inherited by a
    // child another test forks meanwhile, and the exec of the copy then fails with ETXTBSY.
    let st = Command::new("cp")
        .arg(env!("CARGO_BIN_EXE_arenactl"))
        .arg(&bin)
        .status()
        .unwrap();
    assert!(st.success(), "cp arenactl: {st}");
    (dir, bin)
}

/// The run id a run directory records, once it does (the submitting client still running).
fn run_id(out: &Path, client: &mut Child) -> String {
    let mut id = String::new();
    until("the run never recorded its id", || {
        if let Some(st) = client.try_wait().unwrap() {
            let mut err = String::new();
            std::io::Read::read_to_string(client.stderr.as_mut().unwrap(), &mut err).unwrap();
            panic!("the client ended ({st}) before the run began: {err}");
        }
        let Ok(t) = std::fs::read_to_string(out.join("run.json")) else {
            return false;
        };
        let v: serde_json::Value = serde_json::from_str(&t).unwrap();
        id = v["run_id"].as_str().unwrap_or_default().to_string();
        !id.is_empty()
    });
    id
}

fn submit(runner: &str, out: &Path, agent: &str, token: Option<&Path>) -> Child {
    let mut c = arenactl();
    c.args(["run", "--image-lock"])
        .arg(repo().join("lockfiles/cpu.lock"))
        .args(["--agent", agent])
        .args(CHEAP_TIMING)
        .args(["--tasks", PREFIX_SUM, "--runner", runner, "--out"])
        .arg(out);
    if let Some(t) = token {
        c.arg("--token-file").arg(t);
    }
    c.stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn a_unix_socket_names_its_callers_and_only_its_group_connects() {
    let d = Daemon::start();
    let (dir, bin) = shared_dir(&d);
    let sock = dir.join("runner.sock");
    let listen = format!("unix:{}", sock.display());
    let repo_agents = repo().join("ci/agents");
    let _server = serve(
        &d,
        &listen,
        &[
            "--socket-group",
            &NOBODY.to_string(),
            "--agent-mount-root",
            repo_agents.to_str().unwrap(),
        ],
    );
    until("the runner never listened", || sock.exists());
    let meta = std::fs::metadata(&sock).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o660);

    // Root (an admin) and the socket's group connect; anyone else is refused by the kernel.
    let gpus = ["runner", "gpus", "--runner", &listen];
    let o = arenactl().args(gpus).output().unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let o = as_user(&bin, NOBODY, &gpus);
    assert!(o.status.success(), "{}", show(&o));
    let o = as_user(&bin, STRANGER, &gpus);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("runner"), "{}", show(&o));

    // Root's run: another local user can neither read nor cancel it.
    let out = dir.join("root-run");
    let mut run = submit(&listen, &out, "ci/agents/adversary/sleeper.toml", None);
    let id = run_id(&out, &mut run);
    for verb in ["status", "watch", "cancel"] {
        let o = as_user(&bin, NOBODY, &["runner", verb, &id, "--runner", &listen]);
        assert!(!o.status.success(), "{verb}: {}", show(&o));
        assert!(
            stderr(&o).contains("belongs to uid:0"),
            "{verb}: {}",
            show(&o)
        );
    }
    let o = arenactl()
        .args(["runner", "status", &id, "--runner", &listen, "--json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let st = run.wait().unwrap();
    assert!(st.success(), "root's run was disturbed");
    // Its owner attaches to it afterwards: the history replays, the tables follow.
    let o = arenactl()
        .args(["runner", "watch", &id, "--runner", &listen, "--json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let watched: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(watched["state"], "done", "{watched}");
    assert_eq!(watched["finished"], 1, "{watched}");

    // What nobody names is checked against what nobody may do: a run directory it does not
    // own, and an agent mounting the host's root or /etc by way of `..`.
    let lock = repo().join("lockfiles/cpu.lock");
    let sleeper = repo().join("ci/agents/adversary/sleeper.toml");
    let o = as_user(
        &bin,
        NOBODY,
        &[
            "run",
            "--runner",
            &listen,
            "--image-lock",
            lock.to_str().unwrap(),
            "--agent",
            sleeper.to_str().unwrap(),
            "--out",
            "/etc/arena-runner-api-test",
        ],
    );
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("not a directory uid:65534 owns"),
        "{}",
        show(&o)
    );
    assert!(!Path::new("/etc/arena-runner-api-test").exists());
    let home = dir.join("nobody");
    std::fs::create_dir(&home).unwrap();
    std::os::unix::fs::chown(&home, Some(NOBODY), Some(NOBODY)).unwrap();
    for (name, host, why) in [
        ("root", "/", "covers /"),
        ("dotdot", "../../../../../../../etc", "covers /etc"),
    ] {
        let agent = home.join(format!("{name}.toml"));
        std::fs::write(
            &agent,
            format!(
                "name = \"{name}\"\nimage = \"task\"\ncommand = [\"true\"]\nnetwork = \"none\"\n\
                 timeout_s = 60\n\n[[mount]]\nhost = \"{host}\"\ncontainer = \"/host\"\n"
            ),
        )
        .unwrap();
        std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o644)).unwrap();
        let o = as_user(
            &bin,
            NOBODY,
            &[
                "run",
                "--runner",
                &listen,
                "--image-lock",
                lock.to_str().unwrap(),
                "--agent",
                agent.to_str().unwrap(),
                "--tasks",
                PREFIX_SUM,
                "--out",
                home.join(name).to_str().unwrap(),
            ],
        );
        assert!(!o.status.success(), "{name}: {}", show(&o));
        assert!(
            stderr(&o).contains("mount[0].host") && stderr(&o).contains(why),
            "{name}: {}",
            show(&o)
        );
    }
    // A hidden set everyone may read, in a directory only root may enter: nobody could not
    // read it, so the runner does not read it for nobody.
    let private = dir.join("private");
    std::fs::create_dir(&private).unwrap();
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
    let hidden = private.join("hidden");
    let o = arenactl()
        .args([
            "unseen", "generate", "--tasks", "tasks", "--seed", "3", "--out",
        ])
        .arg(&hidden)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let o = as_user(
        &bin,
        NOBODY,
        &[
            "run",
            "--runner",
            &listen,
            "--image-lock",
            lock.to_str().unwrap(),
            "--agent",
            sleeper.to_str().unwrap(),
            "--unseen",
            hidden.to_str().unwrap(),
            "--out",
            home.join("hidden-run").to_str().unwrap(),
        ],
    );
    assert!(!o.status.success(), "{}", show(&o));
    assert!(
        stderr(&o).contains("hidden_set")
            && stderr(&o).contains(&format!("uid:65534 may not enter {}", private.display())),
        "{}",
        show(&o)
    );
    assert!(!home.join("hidden-run").exists());
    assert!(empty(&d.leftovers()));
}

#[test]
fn tcp_needs_tokens_and_one_identity_cannot_act_on_anothers_run() {
    let d = Daemon::start();
    let (dir, _) = shared_dir(&d);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen = format!("127.0.0.1:{port}");
    let runner = format!("http://{listen}");

    // No token file, no TCP listener.
    let o = arenactl()
        .args(["runner", "serve", "--listen", &listen, "--gpus", "cpu:1"])
        .args(["--containerd", &d.socket])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(stderr(&o).contains("needs --token-file"), "{}", show(&o));

    let tokens = dir.join("tokens");
    let (alice, bob) = (
        "alice-0123456789abcdef0123456789abcdef",
        "bob-0123456789abcdef0123456789abcdef00",
    );
    std::fs::write(&tokens, format!("alice {alice}\nbob {bob}\n")).unwrap();
    std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o600)).unwrap();
    let token_file = |name: &str, t: &str| {
        let p = dir.join(format!("{name}.token"));
        std::fs::write(&p, t).unwrap();
        p
    };
    let (alice_t, bob_t) = (token_file("alice", alice), token_file("bob", bob));
    let wrong_t = token_file("wrong", "wrong-0123456789abcdef0123456789abcdef");
    let _server = serve(
        &d,
        &listen,
        &[
            "--token-file",
            tokens.to_str().unwrap(),
            "--client-root",
            repo().to_str().unwrap(),
            "--client-root",
            dir.to_str().unwrap(),
        ],
    );
    let gpus = |t: Option<&Path>| {
        let mut c = arenactl();
        c.args(["runner", "gpus", "--runner", &runner]);
        if let Some(t) = t {
            c.arg("--token-file").arg(t);
        }
        c.output().unwrap()
    };
    until("the runner never listened", || {
        gpus(Some(&alice_t)).status.success()
    });
    let o = gpus(Some(&wrong_t));
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("not one this runner knows"),
        "{}",
        show(&o)
    );
    let o = gpus(None);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("needs a bearer token"), "{}", show(&o));
    // The server refuses a client that sends nothing, whatever the client program does.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let code = rt.block_on(async {
        let mut c = arena_proto::v1::runner_client::RunnerClient::connect(runner.clone())
            .await
            .unwrap();
        c.list_gpus(arena_proto::v1::ListGpusRequest {})
            .await
            .unwrap_err()
            .code()
    });
    assert_eq!(code, tonic::Code::Unauthenticated);

    // Alice's run: Bob may neither read nor cancel it; Alice may.
    let out = dir.join("alice-run");
    let mut run = submit(
        &runner,
        &out,
        repo()
            .join("ci/agents/adversary/sleeper.toml")
            .to_str()
            .unwrap(),
        Some(&alice_t),
    );
    let id = run_id(&out, &mut run);
    for verb in ["status", "cancel"] {
        let o = arenactl()
            .args(["runner", verb, &id, "--runner", &runner, "--token-file"])
            .arg(&bob_t)
            .output()
            .unwrap();
        assert!(!o.status.success(), "{verb}: {}", show(&o));
        assert!(
            stderr(&o).contains("belongs to token:alice"),
            "{verb}: {}",
            show(&o)
        );
    }
    let o = arenactl()
        .args(["runner", "status", &id, "--runner", &runner, "--token-file"])
        .arg(&alice_t)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    assert!(run.wait().unwrap().success(), "alice's run was disturbed");

    // Bob names a run directory outside the runner's client roots.
    let o = arenactl()
        .args(["run", "--image-lock"])
        .arg(repo().join("lockfiles/cpu.lock"))
        .args(["--agent"])
        .arg(repo().join("ci/agents/adversary/sleeper.toml"))
        .args([
            "--runner",
            &runner,
            "--out",
            "/var/tmp/arena-bob",
            "--token-file",
        ])
        .arg(&bob_t)
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("outside the directories"),
        "{}",
        show(&o)
    );
    assert!(!Path::new("/var/tmp/arena-bob").exists());
    assert!(empty(&d.leftovers()));
}

/// `arenactl runner serve` killed with SIGKILL while a run submitted with `--runner` has its
/// agent's container running: the client fails, and the same client command,
/// against a runner started again on the same store, completes the run: its one result is
/// there once, and nothing of the killed runner's is left in containerd.
#[test]
fn a_killed_runner_serve_is_restarted_and_the_same_client_command_completes_the_run() {
    let d = Daemon::start();
    let sock = d.dir.path().join("runner.sock");
    let listen = format!("unix:{}", sock.display());
    let agent = d.dir.path().join("slow.toml");
    std::fs::write(
        &agent,
        "name = \"slow\"\ncommand = [\"sh\", \"-c\", \"sleep 5\"]\ntimeout_s = 60\n",
    )
    .unwrap();
    let out = d.dir.path().join("run");
    let client = || {
        let mut c = arenactl();
        c.args(["run", "--image-lock"])
            .arg(repo().join("lockfiles/cpu.lock"))
            .arg("--agent")
            .arg(&agent)
            .args(["--tasks", PREFIX_SUM, "--runner", &listen])
            .args(CHEAP_TIMING)
            .arg("--out")
            .arg(&out);
        c
    };
    // The agent's log appears when its container starts.
    let agent_started = || {
        let logs = out.join("tasks/python2python__arena__prefix_sum/r0/logs");
        std::fs::read_dir(logs)
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| e.file_name().to_string_lossy().contains("-agent."))
    };

    let mut server = serve(&d, &listen, &[]);
    until("the runner never listened", || sock.exists());
    let mut run = client()
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    until("the agent never started", agent_started);
    server.0.kill().unwrap();
    server.0.wait().unwrap();
    let st = run.wait().unwrap();
    assert!(!st.success(), "the client passed with its runner killed");
    assert!(
        glob_results(&out).is_empty(),
        "the task run finished before the kill"
    );

    std::fs::remove_file(&sock).ok();
    let _server = serve(&d, &listen, &[]);
    until("the runner never listened again", || sock.exists());
    let o = client().output().unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let rs = results(&out);
    assert_eq!(rs.len(), 1, "{rs:?}");
    assert!(score(&rs[0]).correct, "{}", rs[0]);
    let left = d.leftovers();
    assert!(
        empty(&left),
        "the killed runner's containers were not cleaned: {left}"
    );
}
