"""How performance is measured: job.json's `perf`, typed and read once (evaluate.py), then
passed as this object to the session (measure.py), its timed window (timing.py) and the GPU's
data (gpu.py).

arena's runner writes every field (arena-eval's `trusted::PerfSettings`, whose defaults these
are: crates/arena-eval/tests/perf_settings.rs holds the two equal, field for field). A job
that lacks a field, names one not here, or gives one of the wrong type is refused, named: a
typo would otherwise leave a default in force without a word. The defaults serve scripts that
write their own jobs (ci/gpu, ci/bench), through `PerfSettings(...).as_job()`."""
import dataclasses
import json


@dataclasses.dataclass(frozen=True)
class PerfSettings:
    # Pairs of batches (one of each kernel, in random order) per configuration.
    pairs: int = 10
    # A batch holds as many calls as take about this long.
    target_batch_ms: float = 20.0
    max_calls: int = 4096
    warmup_batches: int = 2
    # GPU kernels: each timed batch captured as a CUDA graph and replayed in the window.
    graphs: bool = True
    # The pairs spread over this many sessions of fresh kernel processes (CPU, GPU).
    sessions: int = 10
    gpu_sessions: int = 5
    # Above 0: one pair a session, from the sessions above up to `pairs`, until the speedup's
    # interval is no wider than this fraction of its median (stopping.py); 0: `pairs` pairs
    # spread over the sessions above.
    stop_width: float = 0.05
    # A batch's inputs written again, up to this many tries, where the device watch saw work
    # in the window they were written in (timing.py's Window.write_inputs).
    busy_tries: int = 3
    # Milliseconds an output may still change after the answer before the batch is failed
    # as deferred work (timing.py's settle).
    deferred_limit_ms: float = 50.0
    # The device watch's sampling gap and what it calls busy (gpu_guard.py).
    watch_gap_us: float = 20.0
    busy_gap_us: float = 100.0
    late_stop_us: float = 1000.0
    # Output words sampled per timed batch, checked after the answer (samples.py).
    output_samples: int = 64
    # Outputs checked per timed batch (a secret sample, measure.py's checked()); 0: every one.
    # The Rust side's default (trusted.rs, PerfSettings::default) is the same.
    checked_calls: int = 64

    @classmethod
    def of(cls, perf):
        """The settings of a job's `perf` (a dict with every field), or ValueError naming what
        is wrong with it."""
        if not isinstance(perf, dict):
            raise ValueError(f"job.json: perf must be an object, not {type(perf).__name__}")
        fields = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(perf) - set(fields))
        missing = sorted(set(fields) - set(perf))
        if unknown or missing:
            raise ValueError(f"job.json: perf has unknown fields {unknown} and lacks {missing}")
        for name, f in fields.items():
            v = perf[name]
            ok = type(v) is bool if f.type is bool else (
                type(v) is int if f.type is int else type(v) in (int, float)
            )
            if not ok:
                raise ValueError(f"job.json: perf.{name} must be a {f.type.__name__}, not {v!r}")
        return cls(**{k: (float(v) if fields[k].type is float else v) for k, v in perf.items()})

    def as_job(self):
        """The settings as job.json's `perf` (every field)."""
        return dataclasses.asdict(self)

    @classmethod
    def overridden(cls, fields, extra_json, source):
        """For scripts: the defaults with `fields` (what the script sets itself), and over
        them the fields of `extra_json`, a JSON object from `source` (a variable's name, to
        try a setting); ValueError naming `source` and what is wrong with it (not an object, a
        field the script sets, a field PerfSettings lacks or of the wrong type)."""
        try:
            extra = json.loads(extra_json or "{}")
        except ValueError as e:
            raise ValueError(f"{source}: not JSON ({e})") from None
        if not isinstance(extra, dict):
            raise ValueError(f"{source}: a JSON object of PerfSettings fields")
        twice = sorted(set(extra) & set(fields))
        if twice:
            raise ValueError(f"{source}: {twice} are set otherwise, not here")
        try:
            return cls.of(dict(cls().as_job(), **fields, **extra))
        except ValueError as e:
            raise ValueError(f"{source}: {e}") from None
