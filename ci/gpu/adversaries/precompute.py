"""Attacks: work that waits on the device for the inputs and computes them before the timed
window (the persistent-kernel hole of docs/trusted-evaluation.md, done with streams that wait
on a value: cuStreamWaitValue32). The captured graph computes nothing; after the capture, for
each call, a side stream sets a sentinel in the call's input slot, waits until the evaluator's
write replaces it, and then runs the kernel into the graph's output. The process is stopped
meanwhile, but the device runs what it was given. The timed replay only waits for that stream.
Expected: the evaluator watches the device while it writes the inputs (gpu_guard.py): the
work shows up as time taken from its watch, on each of the evaluator's tries (its waits,
queued one call after another, run on into later writes of fresh inputs), and the batch fails
(DeviceBusy); where a batch has fewer calls than the watch has tries (a large shape), a later
try can be clean, and then the replay hands back outputs of earlier inputs: wrong outputs.
precompute_every_try.py parks work for every try on purpose."""


def _queue(calls, wait_for_write, compute):
    for a, k, out in calls:
        wait_for_write(a)
        compute(a, k, out)
    report(f"{len(calls)} calls wait on the device for their inputs")


park_after_capture(_queue)
