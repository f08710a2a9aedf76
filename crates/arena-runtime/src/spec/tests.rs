use super::*;
use crate::gpu::GpuProfile;

fn config() -> ContainerConfig {
    ContainerConfig {
        args: vec![
            "python3".into(),
            "scripts/task_runner.py".into(),
            "compile".into(),
        ],
        env: vec![
            "PATH=/bin".into(),
            "A=1".into(),
            "PATH=/usr/bin:/bin".into(),
        ],
        cwd: "/task".into(),
        uid: 0,
        gid: 0,
        binds: vec![
            BindMount {
                source: "/srv/ws".into(),
                destination: "/workspace".into(),
                readonly: false,
            },
            BindMount {
                source: "/srv/task".into(),
                destination: "/reference".into(),
                readonly: true,
            },
        ],
        tmp_bytes: 1 << 30,
        network: Network::None,
        limits: Limits::default(),
        devices: DeviceGrant::default(),
        hostname: "arena".into(),
        readonly_rootfs: false,
        tmpfs: Vec::new(),
        capabilities: Vec::new(),
        seccomp: crate::seccomp::Profile::Agent,
    }
}

#[test]
fn hardening_read_only_root_capabilities_tmpfs_quota_and_destinations() {
    let mut c = config();
    c.readonly_rootfs = true;
    c.capabilities = vec!["CAP_SETUID".into(), "CAP_KILL".into()];
    c.tmpfs = vec![Tmpfs {
        destination: "/scratch/candidate".into(),
        bytes: 1 << 20,
        mode: 0o700,
        uid: 60002,
        gid: 60002,
    }];
    c.limits.cpus = Some(2.5);
    let v = json(&build_spec(&c).unwrap());
    assert_eq!(v["root"]["readonly"], true);
    let caps = &v["process"]["capabilities"];
    assert_eq!(caps["bounding"].as_array().unwrap().len(), 2);
    assert_eq!(caps["ambient"].as_array().unwrap().len(), 0);
    let t = v["mounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["destination"] == "/scratch/candidate")
        .unwrap()
        .clone();
    assert!(t["options"]
        .as_array()
        .unwrap()
        .contains(&serde_json::json!("uid=60002")));
    assert!(t["options"]
        .as_array()
        .unwrap()
        .contains(&serde_json::json!("mode=700")));
    assert_eq!(v["linux"]["resources"]["cpu"]["quota"], 250_000);
    assert_eq!(v["linux"]["resources"]["cpu"]["period"], 100_000);
    assert_eq!(v["linux"]["seccomp"]["defaultAction"], "SCMP_ACT_ALLOW");
    // No capabilities at all by default.
    let v = json(&build_spec(&config()).unwrap());
    assert!(v["process"]["capabilities"]["effective"]
        .as_array()
        .unwrap()
        .is_empty());
    for bad in ["/x/../workspace", "rel", "/a//b", "/"] {
        let mut c = config();
        c.binds[0].destination = bad.into();
        assert!(build_spec(&c).is_err(), "{bad}");
    }
    let mut c = config();
    c.capabilities = vec!["CAP_NOPE".into()];
    assert!(build_spec(&c).is_err());
}

fn json(s: &Spec) -> serde_json::Value {
    serde_json::to_value(s).unwrap()
}

#[test]
fn mounts_env_limits_and_network_none() {
    let v = json(&build_spec(&config()).unwrap());
    assert_eq!(
        v["process"]["env"],
        serde_json::json!(["A=1", "PATH=/usr/bin:/bin"])
    );
    assert_eq!(v["process"]["cwd"], "/task");
    assert_eq!(v["process"]["noNewPrivileges"], true);
    let mounts = v["mounts"].as_array().unwrap();
    let m = |dst: &str| {
        mounts
            .iter()
            .find(|m| m["destination"] == dst)
            .unwrap()
            .clone()
    };
    assert_eq!(
        m("/reference")["options"],
        serde_json::json!(["rbind", "nosuid", "nodev", "ro"])
    );
    assert_eq!(
        m("/workspace")["options"],
        serde_json::json!(["rbind", "nosuid", "nodev", "rw"])
    );
    assert_eq!(m("/tmp")["type"], "tmpfs");
    let ns: Vec<_> = v["linux"]["namespaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["type"].clone())
        .collect();
    assert!(ns.contains(&serde_json::json!("network")));
    assert_eq!(v["linux"]["resources"]["pids"]["limit"], 4096);
    assert_eq!(v["linux"]["resources"]["memory"]["limit"], 16i64 << 30);
    assert_eq!(
        v["linux"]["resources"]["devices"],
        serde_json::json!([{"allow": false, "access": "rwm"}])
    );
}

#[test]
fn host_network_shares_the_host_namespace() {
    let mut c = config();
    c.network = Network::Host;
    let v = json(&build_spec(&c).unwrap());
    let ns: Vec<_> = v["linux"]["namespaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["type"].clone())
        .collect();
    assert!(!ns.contains(&serde_json::json!("network")));
    assert!(ns.contains(&serde_json::json!("pid")));
}

#[test]
fn amd_profile_spec() {
    let mut c = config();
    c.devices = GpuProfile::Amd {
        kfd: "/dev/zero".into(),
        dri_nodes: vec!["/dev/full".into()],
    }
    .resolve()
    .unwrap();
    c.devices.additional_gids.push(44);
    let v = json(&build_spec(&c).unwrap());
    let devs = v["linux"]["devices"].as_array().unwrap();
    assert_eq!(devs[0]["path"], "/dev/kfd");
    assert_eq!(
        (devs[0]["major"].as_i64(), devs[0]["minor"].as_i64()),
        (Some(1), Some(5))
    );
    assert_eq!(devs[1]["path"], "/dev/dri/full");
    let rules = v["linux"]["resources"]["devices"].as_array().unwrap();
    assert_eq!(rules.len(), 3);
    assert_eq!(
        rules[1],
        serde_json::json!({"allow": true, "type": "c", "major": 1, "minor": 5, "access": "rwm"})
    );
    assert!(v["process"]["user"]["additionalGids"]
        .as_array()
        .unwrap()
        .contains(&serde_json::json!(44)));
}

#[test]
fn nvidia_profile_spec_mounts_driver_read_only() {
    let d = tempfile::tempdir().unwrap();
    for n in [
        "nvidia0",
        "nvidia3",
        "nvidiactl",
        "nvidia-uvm",
        "nvidia-uvm-tools",
    ] {
        std::os::unix::fs::symlink("/dev/null", d.path().join(n)).unwrap();
    }
    let mut c = config();
    c.devices = GpuProfile::Nvidia {
        dev_dir: d.path().into(),
        index: 3,
        driver_dir: Some("/usr/local/nvidia".into()),
    }
    .resolve()
    .unwrap();
    let v = json(&build_spec(&c).unwrap());
    let paths: Vec<_> = v["linux"]["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["path"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        paths,
        [
            "/dev/nvidia3",
            "/dev/nvidiactl",
            "/dev/nvidia-uvm",
            "/dev/nvidia-uvm-tools"
        ]
    );
    assert!(
        !paths.contains(&"/dev/nvidia0".to_string()),
        "only the leased GPU"
    );
    let mounts = v["mounts"].as_array().unwrap();
    let drv = mounts
        .iter()
        .find(|m| m["destination"] == "/usr/local/nvidia")
        .unwrap();
    assert!(drv["options"]
        .as_array()
        .unwrap()
        .contains(&serde_json::json!("ro")));
    assert!(v["process"]["env"]
        .as_array()
        .unwrap()
        .contains(&serde_json::json!("CUDA_VISIBLE_DEVICES=0")));
}

#[test]
fn an_evaluator_has_no_message_queue_file_system() {
    let dests = |c: &ContainerConfig| -> Vec<String> {
        json(&build_spec(c).unwrap())["mounts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["destination"].as_str().unwrap().to_string())
            .collect()
    };
    let mut c = config();
    assert!(dests(&c).contains(&"/dev/mqueue".to_string()));
    c.seccomp = crate::seccomp::Profile::Evaluator;
    let d = dests(&c);
    assert!(!d.contains(&"/dev/mqueue".to_string()), "{d:?}");
    assert!(d.contains(&"/dev/shm".to_string()), "{d:?}");
}
