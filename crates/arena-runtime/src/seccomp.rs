//! The seccomp profile of every container: the system calls Docker's default profile denies
//! (kernel modules, kexec, mounts, new namespaces, keyrings, bpf, perf events, clock and
//! swap control, handle-based opens, userfaultfd, io_uring…) fail with EPERM; `clone` with a
//! namespace flag fails too, and `clone3` answers ENOSYS (its flags live in memory a filter
//! cannot read, so the C library falls back to `clone`, which is filtered). Evaluators also
//! lose `ptrace` and cross-process memory access: a kernel process has no business looking
//! into another (and POSIX message queues, which outlive their processes). Every
//! architecture a 64-bit process could switch to is listed, so a 32-bit system call cannot
//! walk around the filter.

use oci_spec::runtime::{
    Arch, LinuxSeccomp, LinuxSeccompAction, LinuxSeccompArgBuilder, LinuxSeccompBuilder,
    LinuxSeccompOperator, LinuxSyscall, LinuxSyscallBuilder,
};

use crate::error::{Result, RuntimeError};

/// Which containers a profile is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// An agent: alone in its container, it may debug its own processes.
    Agent,
    /// An evaluator: kernel processes beside the evaluator; no tracing, no reading another
    /// process's memory.
    Evaluator,
}

/// Denied for every container (names unknown to the host's libseccomp are skipped by runc).
pub const DENIED: &[&str] = &[
    "acct",
    "add_key",
    "bpf",
    "clock_adjtime",
    "clock_settime",
    "clock_settime64",
    "create_module",
    "delete_module",
    "finit_module",
    "fsconfig",
    "fsmount",
    "fsopen",
    "fspick",
    "get_kernel_syms",
    "get_mempolicy",
    "init_module",
    "io_uring_enter",
    "io_uring_register",
    "io_uring_setup",
    "ioperm",
    "iopl",
    "kcmp",
    "kexec_file_load",
    "kexec_load",
    "keyctl",
    "lookup_dcookie",
    "mbind",
    "mount",
    "mount_setattr",
    "move_mount",
    "move_pages",
    "name_to_handle_at",
    "nfsservctl",
    "open_by_handle_at",
    "open_tree",
    "perf_event_open",
    "pivot_root",
    "query_module",
    "quotactl",
    "quotactl_fd",
    "reboot",
    "request_key",
    "set_mempolicy",
    "setns",
    "settimeofday",
    "stime",
    "swapoff",
    "swapon",
    "syslog",
    "sysfs",
    "_sysctl",
    "umount",
    "umount2",
    "unshare",
    "uselib",
    "userfaultfd",
    "ustat",
    "vm86",
    "vm86old",
];

/// Denied in evaluators besides [`DENIED`]. POSIX message queues too: they outlive their
/// processes (a warm evaluator's next candidate, of the same user, could read what the last one
/// queued); an evaluator's container also has no /dev/mqueue (spec.rs), where `open` would make
/// one. Files and System V objects are removed and checked instead.
pub const DENIED_IN_EVALUATORS: &[&str] = &[
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "process_madvise",
    "pidfd_getfd",
    "mq_open",
    "mq_unlink",
    "mq_timedsend",
    "mq_timedreceive",
    "mq_notify",
    "mq_getsetattr",
];

/// The namespace flags of clone(2): CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER,
/// NEWPID, NEWNET, NEWTIME.
pub const NAMESPACE_FLAGS: &[u64] = &[
    0x0002_0000,
    0x0200_0000,
    0x0400_0000,
    0x0800_0000,
    0x1000_0000,
    0x2000_0000,
    0x4000_0000,
    0x0000_0080,
];

const EPERM: u32 = 1;
const ENOSYS: u32 = 38;

fn bad(e: oci_spec::OciSpecError) -> RuntimeError {
    RuntimeError::invalid("seccomp profile", e.to_string())
}

fn errno(names: &[&str], code: u32) -> Result<LinuxSyscall> {
    LinuxSyscallBuilder::default()
        .names(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
        .action(LinuxSeccompAction::ScmpActErrno)
        .errno_ret(code)
        .build()
        .map_err(bad)
}

/// The architectures a process on this machine could make system calls in.
fn architectures() -> Vec<Arch> {
    if cfg!(target_arch = "aarch64") {
        vec![Arch::ScmpArchAarch64, Arch::ScmpArchArm]
    } else {
        vec![Arch::ScmpArchX86_64, Arch::ScmpArchX86, Arch::ScmpArchX32]
    }
}

pub fn profile(p: Profile) -> Result<LinuxSeccomp> {
    let mut syscalls = vec![errno(DENIED, EPERM)?, errno(&["clone3"], ENOSYS)?];
    if p == Profile::Evaluator {
        syscalls.push(errno(DENIED_IN_EVALUATORS, EPERM)?);
    }
    // The flags are clone's first argument on x86-64 and arm64.
    for flag in NAMESPACE_FLAGS {
        let arg = LinuxSeccompArgBuilder::default()
            .index(0usize)
            .value(*flag)
            .value_two(*flag)
            .op(LinuxSeccompOperator::ScmpCmpMaskedEq)
            .build()
            .map_err(bad)?;
        let mut rule = errno(&["clone"], EPERM)?;
        rule.set_args(Some(vec![arg]));
        syscalls.push(rule);
    }
    LinuxSeccompBuilder::default()
        .default_action(LinuxSeccompAction::ScmpActAllow)
        .architectures(architectures())
        .syscalls(syscalls)
        .build()
        .map_err(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_profile_denies_what_docker_denies_and_evaluators_lose_ptrace() {
        let agent = serde_json::to_value(profile(Profile::Agent).unwrap()).unwrap();
        assert_eq!(agent["defaultAction"], "SCMP_ACT_ALLOW");
        let names = |v: &serde_json::Value| -> Vec<String> {
            v["syscalls"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|s| s["names"].as_array().unwrap().clone())
                .map(|n| n.as_str().unwrap().to_string())
                .collect()
        };
        for n in [
            "unshare",
            "mount",
            "keyctl",
            "bpf",
            "kexec_load",
            "setns",
            "io_uring_setup",
        ] {
            assert!(names(&agent).contains(&n.to_string()), "{n}");
        }
        assert!(!names(&agent).contains(&"ptrace".to_string()));
        let eval = serde_json::to_value(profile(Profile::Evaluator).unwrap()).unwrap();
        assert!(names(&eval).contains(&"ptrace".to_string()));
        assert!(names(&eval).contains(&"process_vm_readv".to_string()));
        assert!(names(&eval).contains(&"mq_open".to_string()));
        // clone with CLONE_NEWUSER is one of the masked rules; clone3 cannot be inspected.
        let rules = eval["syscalls"].as_array().unwrap();
        assert!(rules.iter().any(|r| r["names"][0] == "clone"
            && r["args"][0]["value"] == 0x1000_0000u64
            && r["args"][0]["op"] == "SCMP_CMP_MASKED_EQ"));
        assert!(rules
            .iter()
            .any(|r| r["names"][0] == "clone3" && r["errnoRet"] == 38));
        assert!(eval["architectures"].as_array().unwrap().len() >= 2);
    }
}
