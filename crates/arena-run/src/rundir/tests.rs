//! The run directory: atomic writes and what a dead writer left, records and their
//! differences, item directories, results read back.

use super::*;

#[test]
fn atomic_write_replaces_whole_files() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("a/b.json");
    write_atomic(&p, b"one").unwrap();
    write_atomic(&p, b"two").unwrap();
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&p).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o644);
    assert_eq!(std::fs::read(&p).unwrap(), b"two");
    // No temporary files are left beside it.
    assert_eq!(std::fs::read_dir(d.path().join("a")).unwrap().count(), 1);
}

/// What a writer killed before its rename left is removed on resume: its temporary files
/// in the run's and the items' directories, nothing else (a result, a file of the
/// agent's that looks alike but is not a regular file of ours).
#[test]
fn partial_writes_of_a_dead_writer_are_removed_and_nothing_else() {
    let d = tempfile::tempdir().unwrap();
    let rd = RunDir::new(d.path()).unwrap();
    let item = Item {
        task_id: "t/a".into(),
        repeat: 0,
    };
    let idir = rd.item_dir(&item);
    std::fs::create_dir_all(idir.join(format!("{PARTIAL_PREFIX}dir"))).unwrap();
    write_atomic(&idir.join("result.json"), b"{}").unwrap();
    let left = [
        d.path().join(format!("{PARTIAL_PREFIX}run")),
        idir.join(format!("{PARTIAL_PREFIX}result")),
    ];
    for p in &left {
        std::fs::write(p, b"half").unwrap();
    }
    let mut removed = rd.remove_partial_writes(&[item]).unwrap();
    removed.sort();
    let mut want = left.to_vec();
    want.sort();
    assert_eq!(removed, want);
    assert!(idir.join("result.json").is_file());
    assert!(idir.join(format!("{PARTIAL_PREFIX}dir")).is_dir());
}

#[test]
fn first_difference_names_the_field() {
    let a = RunRecord {
        schema: RUN_SCHEMA.into(),
        run_id: "r1".into(),
        image_lock: "/x/cpu.lock".into(),
        lock_digest: "sha256:a".into(),
        agent: "scripted".into(),
        agent_digest: "sha256:b".into(),
        tasks: vec!["t/a".into()],
        runs: 1,
        hidden_set_digest: None,
        memory_bytes: None,
        perf_pairs: None,
        trusted_pairs: None,
        checked_calls: None,
        owner: None,
    };
    assert_eq!(a.first_difference(&a.clone()), None);
    // A resume is the same run whatever its id.
    let mut same = a.clone();
    same.run_id = new_run_id();
    assert_eq!(a.first_difference(&same), None);
    let mut b = a.clone();
    b.runs = 2;
    b.run_id = "r2".into();
    assert_eq!(a.first_difference(&b), Some("runs"));
    let mut c = a.clone();
    c.hidden_set_digest = Some("sha256:c".into());
    assert_eq!(a.first_difference(&c), Some("hidden_set_digest"));
    let mut t = a.clone();
    t.trusted_pairs = Some(3);
    assert_eq!(a.first_difference(&t), Some("trusted_pairs"));
    // Every output checked is another run than a sample of them.
    let mut k = a.clone();
    k.checked_calls = Some(0);
    assert_eq!(a.first_difference(&k), Some("checked_calls"));
}

#[test]
fn run_ids_are_random_and_records_of_unknown_schemas_refused() {
    let (a, b) = (new_run_id(), new_run_id());
    assert_ne!(a, b);
    assert_eq!(a.len(), 25);
    let d = tempfile::tempdir().unwrap();
    let rd = RunDir::new(d.path()).unwrap();
    assert!(rd.load_record().unwrap().is_none());
    std::fs::write(rd.record_path(), r#"{"schema":"arena.run/v7","run_id":"r","image_lock":"l","lock_digest":"d","agent":"a","agent_digest":"g","tasks":[],"runs":1}"#).unwrap();
    let e = rd.load_record().unwrap_err().to_string();
    assert!(e.contains("arena.run/v7") && e.contains("run.json"), "{e}");
}

#[test]
fn an_unreadable_result_is_reported_not_taken_for_unfinished() {
    let d = tempfile::tempdir().unwrap();
    let rd = RunDir::new(d.path()).unwrap();
    let item = Item {
        task_id: "t/a".into(),
        repeat: 0,
    };
    assert_eq!(rd.result_state(&item), ResultState::Missing);
    std::fs::create_dir_all(rd.item_dir(&item)).unwrap();
    std::fs::write(rd.result_path(&item), "{ not json").unwrap();
    match rd.result_state(&item) {
        ResultState::Unreadable(why) => assert!(why.contains("result.json"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert!(rd.load_result(&item).is_none());
}

#[test]
fn item_dirs_are_flat_and_distinct() {
    let d = tempfile::tempdir().unwrap();
    let rd = RunDir::new(d.path()).unwrap();
    let a = rd.item_dir(&Item {
        task_id: "t/a/b".into(),
        repeat: 1,
    });
    assert!(a.ends_with("tasks/t__a__b/r1"));
}

#[test]
fn task_runs_that_start_together_each_get_their_directory() {
    // Slurm starts the jobs of one run at once; each makes `tasks/…` on the way to its
    // own directory, and none may fail because another made it first (seen in CI:
    // `tasks: File exists`). Many rounds, so the race is hit, not hoped for.
    for round in 0..50 {
        let d = tempfile::tempdir().unwrap();
        let rd = std::sync::Arc::new(RunDir::new(&d.path().join("run")).unwrap());
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(6));
        let threads: Vec<_> = (0..6u32)
            .map(|i| {
                let (rd, barrier) = (rd.clone(), barrier.clone());
                std::thread::spawn(move || {
                    let item = Item {
                        task_id: format!("t/{}", i % 2),
                        repeat: i,
                    };
                    barrier.wait();
                    rd.secure_item_dir(&item)
                })
            })
            .collect();
        for t in threads {
            let made = t.join().unwrap();
            assert!(
                made.as_ref().is_ok_and(|p| p.is_dir()),
                "round {round}: {made:?}"
            );
        }
    }
}

#[test]
fn a_link_planted_on_the_way_to_an_item_directory_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let rd = RunDir::new(&d.path().join("run")).unwrap();
    let item = Item {
        task_id: "a/b".into(),
        repeat: 0,
    };
    let made = rd.secure_item_dir(&item).unwrap();
    assert!(made.is_dir() && made.ends_with("tasks/a__b/r0"));
    // Someone replaces the task's directory with a link to a directory of the host's.
    let victim = d.path().join("victim");
    std::fs::create_dir(&victim).unwrap();
    let task_dir = rd.root.join("tasks/a__b");
    std::fs::remove_dir_all(&task_dir).unwrap();
    std::os::unix::fs::symlink(&victim, &task_dir).unwrap();
    let e = rd.secure_item_dir(&item).unwrap_err().to_string();
    assert!(
        e.contains("a symbolic link") && e.contains("tasks/a__b"),
        "{e}"
    );
    assert_eq!(
        std::fs::read_dir(&victim).unwrap().count(),
        0,
        "nothing made there"
    );
    // A file where a directory belongs is refused too.
    std::fs::remove_file(&task_dir).unwrap();
    std::fs::write(&task_dir, "x").unwrap();
    let e = rd.secure_item_dir(&item).unwrap_err().to_string();
    assert!(e.contains("not a directory"), "{e}");
}

/// A link someone else planted on the way to a run directory that is still to be made (the
/// runner checked the path before, found it in a directory of its caller's, and now makes
/// it): refused, naming it, and nothing is made where it points. A link the runner's own user
/// made in a directory only it writes is followed. Needs root (the planted link is another
/// user's).
#[test]
fn a_link_planted_on_the_way_to_a_run_directory_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().unwrap();
    let caller = d.path().join("caller");
    std::fs::create_dir(&caller).unwrap();
    std::os::unix::fs::chown(&caller, Some(4242), Some(4242)).unwrap();
    let victim = d.path().join("victim");
    std::fs::create_dir(&victim).unwrap();
    // The caller's own link in its own directory, to a directory of root's.
    let link = caller.join("runs");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    std::os::unix::fs::lchown(&link, Some(4242), Some(4242)).unwrap();
    for named in [link.join("r1"), link.clone(), link.join("a/b/../c")] {
        let e = RunDir::new(&named).unwrap_err().to_string();
        assert!(
            e.contains("a symbolic link") && e.contains(&link.display().to_string()),
            "{}: {e}",
            named.display()
        );
    }
    assert_eq!(std::fs::read_dir(&victim).unwrap().count(), 0, "made there");
    // Root's link in a directory anyone may write is no better: anyone could have made it.
    std::fs::set_permissions(&caller, std::fs::Permissions::from_mode(0o777)).unwrap();
    std::os::unix::fs::chown(&caller, Some(0), Some(0)).unwrap();
    std::os::unix::fs::lchown(&link, Some(0), Some(0)).unwrap();
    assert!(RunDir::new(&link.join("r1")).is_err());
    assert_eq!(std::fs::read_dir(&victim).unwrap().count(), 0, "made there");
    // Root's link in root's own directory is followed; the run's root is where it leads.
    std::fs::set_permissions(&caller, std::fs::Permissions::from_mode(0o755)).unwrap();
    let rd = RunDir::new(&link.join("r1")).unwrap();
    assert_eq!(rd.root, victim.canonicalize().unwrap().join("r1"));
    // Swapped for another user's link once made: the next item directory is refused.
    let item = Item {
        task_id: "t/a".into(),
        repeat: 0,
    };
    rd.secure_item_dir(&item).unwrap();
    let moved = d.path().join("moved");
    std::fs::rename(&victim, &moved).unwrap();
    std::os::unix::fs::symlink(&moved, &victim).unwrap();
    std::os::unix::fs::lchown(&victim, Some(4242), Some(4242)).unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let e = rd.secure_item_dir(&item).unwrap_err().to_string();
    assert!(e.contains("a symbolic link"), "{e}");
}
