"""The keys of a performance case the evaluator writes, with their JSON types: the schema of the
runner's Rust types (arena_eval::record::PerfCase, its Pairing and Measured), which
crates/arena-eval/tests/record_schema.rs holds equal to this. measure.py and simulated.py check
every case against it before writing it (`checked`): a key the runner would not read into a
typed field, or a value of another type, is the evaluator's own bug, and fails the evaluation
instead of reaching a report as an untyped extra."""

# Typed in Rust: key -> JSON type.
CASE = {
    "test_case_id": "string",
    "execution_time_ms": "number",
    "error": "string",
    "baseline_ms": "number",
    "pairs_ms": "array",
    "paired_by": "string",
    "pair_sessions": "array",
    "stop": "object",
    "compiled_ms": "number",
    "compiled_pairs_ms": "array",
    "compiled_error": "string",
    "cycles": "integer",
    "baseline_cycles": "integer",
    "samples_ms": "array",
    "calls_per_batch": "object",
    "timing": "object",
    "graph_error": "object",
    "method": "string",
}
# AgentKernelArena's own report keys, which the evaluator writes as its reports do; Rust keeps
# them verbatim (PerfCase.extra).
AKA = {"params": "object"}

_TYPES = {
    "string": lambda v: isinstance(v, str),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
}


def checked(case):
    """`case`, once every key of it is in the schema with a value of its type (ValueError
    naming the key otherwise)."""
    for key, value in case.items():
        kind = CASE.get(key) or AKA.get(key)
        if kind is None:
            raise ValueError(f"performance case {case.get('test_case_id')!r}: key {key!r} is not in the runner's schema (record.py)")
        if not _TYPES[kind](value):
            raise ValueError(f"performance case {case.get('test_case_id')!r}: {key} is a {type(value).__name__}, the schema says {kind} (record.py)")
    return case
