"""Removing what a kernel's user left in the shared places, as that user (root here has no
capability to enter another user's directories), and checking that nothing is left.

Used after each step of a self-reported task (gates.py) and after each evaluation of a warm
evaluator (evaluate.py's serve mode): nothing one kernel process starts or leaves may be found
by the next, whoever's it is.
"""
import os

SHARED_TMP = ("/tmp", "/dev/shm")

# Run as a kernel's user: `python3 -I -S -c CLEANER ROOT REL…` removes ROOT/REL for each REL
# (its reports, copied by then; `*` is every entry of ROOT), whatever the user left in the
# shared temporary directories (its own directories made writable first, so that a mode cannot
# keep their contents), and its System V IPC objects (shared memory would stay charged to the
# container's memory). It can only remove what that user may; the caller then checks that
# nothing of the user is left (`leftovers`).
CLEANER = r"""
import os, shutil, sys
uid = os.getuid()

def writable(func, path, exc):
    try:
        os.chmod(os.path.dirname(path), 0o700)
        os.chmod(path, 0o700) if os.path.isdir(path) and not os.path.islink(path) else None
        func(path)
    except OSError:
        pass

def remove(p):
    try:
        if os.path.isdir(p) and not os.path.islink(p):
            os.chmod(p, 0o700)
            shutil.rmtree(p, onerror=writable)
        else:
            os.unlink(p)
    except (OSError, RecursionError):
        pass

for rel in sys.argv[2:]:
    if rel == "*":
        try:
            # The user's own root (its scratch): a mode it set cannot keep its entries.
            os.chmod(sys.argv[1], 0o700)
        except OSError:
            pass
        try:
            names = os.listdir(sys.argv[1])
        except OSError:
            names = []
        for n in names:
            remove(os.path.join(sys.argv[1], n))
        # Nor its extended attributes or times: the root is left as it was made, but for the
        # time it changed (which root reads to know it is untouched since).
        try:
            for a in os.listxattr(sys.argv[1]):
                os.removexattr(sys.argv[1], a)
        except OSError:
            pass
        try:
            os.utime(sys.argv[1], ns=(0, 0))
        except OSError:
            pass
    else:
        remove(os.path.join(sys.argv[1], rel))
for d in ("/tmp", "/dev/shm"):
    try:
        names = os.listdir(d)
    except OSError:
        continue
    for n in names:
        p = os.path.join(d, n)
        try:
            if os.lstat(p).st_uid == uid:
                remove(p)
        except OSError:
            pass
try:
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    ctls = (("shm", libc.shmctl), ("msg", libc.msgctl), ("sem", libc.semctl))
except (ImportError, OSError):
    ctls = ()  # no ctypes in the image: root's check below still finds what is left
for kind, ctl in ctls:
    try:
        lines = open("/proc/sysvipc/" + kind).read().split("\n")
    except OSError:
        continue
    head = lines[0].split()
    for line in lines[1:]:
        f = line.split()
        # Its owner or its creator: a creator may give an object to another owner
        # (IPC_SET) and still use it; either may remove it.
        if len(f) == len(head) and uid in (int(f[head.index("uid")]), int(f[head.index("cuid")])):
            ident = int(f[1])
            ctl(ident, 0, 0) if kind == "sem" else ctl(ident, 0, None)
"""


def leftovers(uid):
    """What of `uid` is left in the shared places after its clean-up (root looks)."""
    left = []
    for d in SHARED_TMP:
        try:
            names = os.listdir(d)
        except OSError:
            continue
        for n in names:
            try:
                if os.lstat(os.path.join(d, n)).st_uid == uid:
                    left.append(os.path.join(d, n))
            except OSError:
                pass
    for kind in ("shm", "msg", "sem"):
        try:
            with open(f"/proc/sysvipc/{kind}") as f:
                lines = f.read().split("\n")
        except OSError:
            continue
        head = lines[0].split()
        for line in lines[1:]:
            fields = line.split()
            if len(fields) != len(head) or "uid" not in head or "cuid" not in head:
                continue
            if uid in (int(fields[head.index("uid")]), int(fields[head.index("cuid")])):
                left.append(f"sysv {kind} {fields[1]}")
    return left
