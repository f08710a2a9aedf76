"""Attacks: the other kernel's timed batches. After each of its own batches the kernel leaves a
50 ms spinning kernel on the device and answers; the process is stopped, but the spinner runs
on into whatever the evaluator times next, the original's batch among them, and an honest
candidate's ratio grows.
Expected: the evaluator watches the device before every batch it times (gpu_guard.py): the
spinner is seen and the case fails (DeviceBusy on each of the watch's tries), or, where it ends
within them, the batch timed starts on an idle device; never faster than untouched."""
import torch

_c = child()
_side = torch.cuda.Stream()
_run, _replay = _c.run, _c.replay


def _spin():
    with torch.cuda.stream(_side):
        torch.cuda._sleep(int(0.05 * 2.0e9))


def _run_then_spin(msg):
    reply = _run(msg)
    _spin()
    return reply


def _replay_then_spin(msg):
    reply = _replay(msg)
    _spin()
    return reply


_c.run = _run_then_spin
_c.replay = _replay_then_spin
install(lambda f: f)
