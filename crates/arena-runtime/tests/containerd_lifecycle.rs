//! arena-runtime runs containers against a real containerd: read-only binds, devices, network
//! isolation, timeouts, the pids limit, capped output and cancellation. Each test starts a
//! private daemon (its own root, state and socket in a temporary directory, stopped by PID at
//! the end) and runs containers from the testbase image built by arena-image. Needs root,
//! containerd and runc (ci/setup.sh installs them).

mod common;

use std::collections::HashMap;
use std::io::Write;
use std::process::Command;
use std::time::Duration;

use arena_runtime::{run_container, BindMount, GpuProfile, Limits, Network, RunRequest};
use common::{assert_clean, config, read, rt, run, setup};

#[tokio::test(flavor = "multi_thread")]
async fn read_only_binds_really_are_and_the_workspace_is_writable() {
    let (_d, c, image, t) = setup().await;
    let ws = t.path().join("ws");
    let reference = t.path().join("ref");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&reference).unwrap();
    std::fs::write(reference.join("k.py"), "orig").unwrap();
    let mut cfg = config(&[
        "/bin/sh",
        "-c",
        "echo x > /reference/k.py; echo ref=$?; echo y > /workspace/out; echo ws=$?; \
         touch /tmp/t && echo tmp=$?; grep ' /reference ' /proc/mounts",
    ]);
    cfg.binds = vec![
        BindMount {
            source: ws.clone(),
            destination: "/workspace".into(),
            readonly: false,
        },
        BindMount {
            source: reference.clone(),
            destination: "/reference".into(),
            readonly: true,
        },
    ];
    let out = run(
        &c,
        &image,
        "ro-test",
        cfg,
        Duration::from_secs(30),
        t.path(),
    )
    .await;
    let stdout = read(&out.stdout);
    assert!(stdout.contains("ref=1"), "{stdout}{}", read(&out.stderr));
    assert!(
        stdout.contains("ws=0") && stdout.contains("tmp=0"),
        "{stdout}"
    );
    assert!(
        stdout
            .lines()
            .any(|l| l.contains(" /reference ") && l.contains(" ro,")),
        "{stdout}"
    );
    assert!(
        read(&out.stderr).contains("Read-only file system"),
        "{}",
        read(&out.stderr)
    );
    assert_eq!(read(&reference.join("k.py")), "orig");
    assert_eq!(read(&ws.join("out")), "y\n");
    assert_eq!(out.exit_code, 0);
    assert_clean(&c).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_passed_device_appears_with_its_numbers_and_no_other() {
    let (_d, c, image, t) = setup().await;
    let mut cfg = config(&[
        "/bin/sh",
        "-c",
        "stat -c '%F %t:%T' /dev/kfd; head -c 3 /dev/kfd | busybox od -An -tx1; \
         test -e /dev/dri/renderD128 && echo has-dri; test -e /dev/dri/card0; echo card0=$?",
    ]);
    // /dev/zero stands in for /dev/kfd, /dev/null for the render node.
    cfg.devices = GpuProfile::Amd {
        kfd: "/dev/zero".into(),
        dri_nodes: vec!["/dev/null".into()],
    }
    .resolve()
    .unwrap();
    cfg.devices.devices[1].path = "/dev/dri/renderD128".into();
    let out = run(
        &c,
        &image,
        "dev-test",
        cfg,
        Duration::from_secs(30),
        t.path(),
    )
    .await;
    let stdout = read(&out.stdout);
    assert!(
        stdout.contains("character special file 1:5"),
        "{stdout}{}",
        read(&out.stderr)
    );
    assert!(
        stdout.contains("00 00 00"),
        "reading the device is allowed: {stdout}"
    );
    assert!(stdout.contains("has-dri"), "{stdout}");
    // runc's standard nodes (/dev/null, /dev/full…) are always there; GPU nodes only as granted.
    assert!(
        stdout.contains("card0=1"),
        "a device not granted is absent: {stdout}"
    );
    assert_clean(&c).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn network_none_cannot_reach_a_host_server_and_host_can() {
    let (_d, c, image, t) = setup().await;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in listener.incoming().flatten() {
            let mut s = s;
            let _ = s.write_all(b"hello-from-host\n");
        }
    });
    let probe = format!(
        "import socket\ntry:\n    s = socket.create_connection(('127.0.0.1', {port}), timeout=3)\n    print('connected', s.recv(64).decode().strip())\nexcept OSError as e:\n    print('refused', e)\n"
    );
    let out = run(
        &c,
        &image,
        "net-none",
        config(&["python3", "-c", &probe]),
        Duration::from_secs(30),
        t.path(),
    )
    .await;
    let none = read(&out.stdout);
    assert!(none.starts_with("refused"), "{none}{}", read(&out.stderr));
    let mut cfg = config(&["python3", "-c", &probe]);
    cfg.network = Network::Host;
    let out = run(
        &c,
        &image,
        "net-host",
        cfg,
        Duration::from_secs(30),
        t.path(),
    )
    .await;
    assert_eq!(read(&out.stdout).trim(), "connected hello-from-host");
    assert_clean(&c).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sleep_is_killed_at_its_timeout() {
    let (_d, c, image, t) = setup().await;
    let started = std::time::Instant::now();
    let out = run(
        &c,
        &image,
        "sleeper",
        config(&["/bin/sh", "-c", "sleep 1000 & sleep 1000"]),
        Duration::from_secs(2),
        t.path(),
    )
    .await;
    assert!(out.timed_out);
    assert_eq!(out.exit_code, 137);
    assert!(
        out.durations.run_s >= 2.0 && out.durations.run_s < 10.0,
        "{:?}",
        out.durations
    );
    assert!(started.elapsed() < Duration::from_secs(20));
    assert_clean(&c).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fork_bomb_is_stopped_by_the_pids_limit() {
    let (_d, c, image, t) = setup().await;
    let bomb = "import os, time\nn = 0\ntry:\n    while True:\n        if os.fork() == 0:\n            time.sleep(60)\n            os._exit(0)\n        n += 1\nexcept OSError as e:\n    print('forks', n, e.errno)\n";
    let mut cfg = config(&["python3", "-c", bomb]);
    cfg.limits = Limits {
        pids: 40,
        ..Limits::default()
    };
    let out = run(&c, &image, "bomb", cfg, Duration::from_secs(20), t.path()).await;
    let stdout = read(&out.stdout);
    let forks: u32 = stdout
        .split_whitespace()
        .nth(1)
        .unwrap_or_else(|| panic!("{stdout}{}", read(&out.stderr)))
        .parse()
        .unwrap();
    assert!(forks < 40, "{stdout}");
    assert!(stdout.trim().ends_with(" 11"), "EAGAIN expected: {stdout}");
    // When the bomb's parent (the container's init) exits, the kernel kills every process
    // left in the container's PID namespace: the sleeping children do not outlive it.
    assert!(!out.timed_out && out.exit_code == 0, "{out:?}");
    assert!(out.durations.run_s < 15.0, "{:?}", out.durations);
    assert!(
        Command::new("true").status().unwrap().success(),
        "the host can still fork"
    );
    assert_clean(&c).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn output_is_capped_and_the_exit_code_kept() {
    let (_d, c, image, t) = setup().await;
    let cfg = config(&[
        "/bin/sh",
        "-c",
        "yes | head -c 100000; echo oops >&2; exit 3",
    ]);
    let out = run_container(
        &rt(&c),
        RunRequest {
            id: "chatty".into(),
            image: image.clone(),
            config: cfg,
            timeout: Duration::from_secs(30),
            log_dir: t.path().into(),
            log_cap: 1000,
            labels: HashMap::new(),
            cancel: None,
            on_started: None,
        },
    )
    .await
    .unwrap();
    assert_eq!(out.exit_code, 3);
    assert_eq!(std::fs::metadata(&out.stdout).unwrap().len(), 1000);
    assert_eq!(out.stdout_bytes, 100000);
    assert!(out.stdout_truncated && !out.stderr_truncated);
    assert_eq!(read(&out.stderr), "oops\n");
    assert_clean(&c).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn cancel_kills_the_container_and_cleans_up() {
    let (_d, c, image, t) = setup().await;
    let (tx, rx) = tokio::sync::watch::channel(false);
    let c2 = c.clone();
    let img = image.clone();
    let logs = t.path().to_path_buf();
    // Cancelled once its process runs: on the runtime's own word, not after a guessed delay.
    let started = std::sync::Arc::new(tokio::sync::Notify::new());
    let on_started = Some(started.clone());
    let h = tokio::spawn(async move {
        run_container(
            &rt(&c2),
            RunRequest {
                id: "cancelled".into(),
                image: img,
                config: config(&["sleep", "1000"]),
                timeout: Duration::from_secs(600),
                log_dir: logs,
                log_cap: 1000,
                labels: HashMap::new(),
                cancel: Some(rx),
                on_started,
            },
        )
        .await
    });
    tokio::time::timeout(Duration::from_secs(60), started.notified())
        .await
        .expect("the container started");
    tx.send(true).unwrap();
    let out = tokio::time::timeout(Duration::from_secs(30), h)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(out.cancelled && !out.timed_out);
    assert_clean(&c).await;
}
