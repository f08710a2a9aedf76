#!/usr/bin/env python3
"""Attack: an agent (root in its container, no capabilities: arena-runtime's spec keeps none)
changes the GPU's settings through NVML so that what follows on the node is measured on
another device: its clocks, power limit, compute mode (EXCLUSIVE_PROCESS would keep the
evaluator's second context off the GPU) or persistence. Expected: every setting call is
refused (NVML_ERROR_NO_PERMISSION: the driver asks for CAP_SYS_ADMIN), while reads work.

Each setting call names the value the device already has, so that where containment were
wrong it would still change nothing (the device's settings are not ours to change). The
control: the same reads by a process that keeps its capabilities, after the attack, equal to
what the attacker read before its tries.

usage: python3 ci/gpu/nvml-privilege.py OUT.json     (as root, on the GPU machine)
"""
import ctypes
import json
import os
import sys

NO_PERMISSION = 4
NAMES = {0: "SUCCESS", 1: "UNINITIALIZED", 2: "INVALID_ARGUMENT", 3: "NOT_SUPPORTED", 4: "NO_PERMISSION"}


def nvml():
    lib = ctypes.CDLL("libnvidia-ml.so.1")
    assert lib.nvmlInit_v2() == 0, "nvmlInit"
    h = ctypes.c_void_p()
    assert lib.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(h)) == 0, "handle"
    return lib, h


def reads(lib, h):
    u = ctypes.c_uint()
    out = {}
    for name, fn in [("persistence", lib.nvmlDeviceGetPersistenceMode), ("compute_mode", lib.nvmlDeviceGetComputeMode),
                     ("power_limit_mw", lib.nvmlDeviceGetPowerManagementLimit)]:
        rc = fn(h, ctypes.byref(u))
        out[name] = u.value if rc == 0 else f"error {rc}"
    return out


def drop_capabilities():
    """What an agent container's process has: uid 0, every capability set empty, no new
    privileges (arena-runtime's spec)."""
    libc = ctypes.CDLL(None, use_errno=True)
    PR_SET_NO_NEW_PRIVS, PR_CAPBSET_DROP = 38, 24
    for cap in range(64):
        libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    assert libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]

    hdr, data = Header(0x20080522, 0), (Data * 2)()
    assert libc.capset(ctypes.byref(hdr), data) == 0, os.strerror(ctypes.get_errno())
    with open("/proc/self/status") as f:
        return {k: v.strip() for k, v in (line.split(":", 1) for line in f) if k in ("CapEff", "CapPrm", "CapBnd", "Uid")}


def main():
    out = sys.argv[1]
    # The child first, NVML not yet loaded here: it opens the driver itself, as an agent would.
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        res = {"status": drop_capabilities()}
        lib2, h2 = nvml()
        cur = reads(lib2, h2)
        res["reads"] = cur
        tries = {}
        if isinstance(cur["persistence"], int):
            tries["set_persistence_mode(current)"] = lib2.nvmlDeviceSetPersistenceMode(h2, cur["persistence"])
        if isinstance(cur["compute_mode"], int):
            tries["set_compute_mode(current)"] = lib2.nvmlDeviceSetComputeMode(h2, cur["compute_mode"])
        if isinstance(cur["power_limit_mw"], int):
            tries["set_power_limit(current)"] = lib2.nvmlDeviceSetPowerManagementLimit(h2, cur["power_limit_mw"])
        res["tries"] = {k: NAMES.get(v, str(v)) for k, v in tries.items()}
        os.write(w, json.dumps(res).encode())
        os._exit(0)
    os.close(w)
    child = json.loads(os.read(r, 1 << 16).decode() or "{}")
    os.waitpid(pid, 0)
    lib, h = nvml()
    after = reads(lib, h)
    before = child.get("reads")
    result = {"control_reads_after": after, "unchanged": before == after, "agent_like": child}
    refused = all(v == "NO_PERMISSION" for v in child.get("tries", {}).values()) and bool(child.get("tries"))
    result["verdict"] = "refused" if refused else "NOT REFUSED"
    json.dump(result, open(out, "w"), indent=1)
    print(json.dumps(result, indent=1))
    sys.exit(0 if refused and result["unchanged"] else 1)


if __name__ == "__main__":
    main()
