"""Attacks: freezing by process. At import the kernel starts a helper process whose first thread
calls exit while a second thread runs: it shows as a zombie (state Z) and was skipped when the
kernel's user was stopped. The helper burns the CPU and keeps the GPU busy with short sleeping
kernels all the time, the original's timed batches included.
Expected: the helper is stopped and killed with its user (jail.py lists such processes): the
only batches it can slow are its own kernel's; never faster than untouched."""
import subprocess
import sys

_HELPER = r"""
import ctypes, threading, time, torch
def burn():
    s = torch.cuda.Stream()
    while True:
        with torch.cuda.stream(s):
            torch.cuda._sleep(200000)
        t = time.time() + 0.001
        while time.time() < t:
            pass
threading.Thread(target=burn).start()
time.sleep(1.0)
ctypes.CDLL(None).syscall(60, 0)
"""
subprocess.Popen([sys.executable, "-c", _HELPER], stdin=subprocess.DEVNULL)
report("a helper that looks like a zombie was started")
install(lambda f: f)
