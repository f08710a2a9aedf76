"""Attacks: the device watch's further tries (GpuData.disarm, timing.Window.write_inputs). A
batch whose watch saw other work gets its inputs made afresh and written again, up to `busy_tries` (3)
times. This kernel, having read that, parks work for every try: after the capture a side stream
waits until the evaluator's write replaces a sentinel in the first call's input slot, computes
every call into the graph's outputs, sets the sentinel again and waits for the next try's
write, three rounds in all. The replay only waits for that stream.
Expected: its work runs inside every try's watch, so the last try fails the batch
(DeviceBusy); never faster than untouched."""

_TRIES = 3


def _queue(calls, wait_for_write, compute):
    if not calls:
        return
    for _ in range(_TRIES):
        wait_for_write(calls[0][0])
        for a, k, out in calls:
            compute(a, k, out)
    report(f"{len(calls)} calls computed on each of {_TRIES} writes of their inputs")


park_after_capture(_queue)
