"""arena's trusted evaluator: python3 -I -B evaluate.py JOB.json

Runs as the evaluator container's first process, with the only privileges it needs (to start
kernel processes as other users and to stop them). It reads the task's trusted harness (a
private copy the kernel processes cannot read), makes inputs from a secret seed, times the
kernel processes from outside, checks every output with its own reference, and writes the
gates' verdicts and reports where only it can write (evaluation.py). See
docs/trusted-evaluation.md.

With `serve` in the job it is a warm evaluator (the runner's Evaluate API, serve.py): it
evaluates one request after another, each with fresh kernel processes and a new secret seed.
"""
import json
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from deadline import Deadline, install as install_deadline  # noqa: E402
from evaluation import (  # noqa: E402
    add_phase,
    configs_of,
    early_zygote,
    evaluate_into,
    make_data,
    new_record,
    process_age,
    record_failure,
    use_own_scratch,
    write_json,
    zygote_for,
)
from harness import Harness  # noqa: E402
from perf_settings import PerfSettings  # noqa: E402


def main(job_path):
    import jail  # noqa: E402
    import wire  # noqa: E402

    # Before anything heavy is loaded: each freeze forks it (jail.py, signaller.py).
    jail.start_signaller()

    wire.IMPORT_TORCH = False  # see wire.py: a kernel's tensor never makes this process import
    with open(job_path) as f:
        job = json.load(f)
    # Read once, typed; every reader is given this object (perf_settings.py).
    job["perf"] = PerfSettings.of(job.get("perf"))
    own = use_own_scratch(job)
    install_deadline("the evaluator")
    if job.get("serve"):
        import serve  # noqa: E402

        return serve.serve(job)
    # The container's own limit holds even if nobody outside is left to enforce it.
    signal.alarm(int(job.get("deadline_s", 3600)))
    out = job["out"]
    record = new_record()
    if own is not None:
        record["own_scratch"] = own
    age = process_age()
    if age is not None:
        add_phase(record, "start", age)
    t = time.monotonic()
    zygote = early_zygote(job)
    try:
        try:
            harness = Harness(job["harness"], job.get("accelerator", True))
            record["device"] = harness.device
            configs, hidden = configs_of(job, harness)
            data = make_data(job, harness)
            zygote, early = zygote_for(job, harness, zygote), zygote
            if zygote is not None:
                zygote.ready()
                record["zygote"] = {"loaded": zygote.loaded, "failed": zygote.failed, "early": zygote is early}
            # The harness and its modules, the device (CUDA context, buffers) and the zygote's
            # imports, which run beside them.
            add_phase(record, "setup", time.monotonic() - t)
        except (Exception, Deadline) as e:
            record_failure(record, e, bool(job.get("hidden")))
            with open(os.path.join(out, "gates"), "w") as gates:
                gates.write("setup 96\n")
            write_json(out, "evaluator.json", record)
            return
        evaluate_into(job, harness, data, configs, hidden, job["roles"], out, record, zygote)
    finally:
        if zygote is not None:
            zygote.close()


if __name__ == "__main__":
    main(sys.argv[1])
