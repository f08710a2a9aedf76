"""When the performance gate has taken enough pairs: the rule measure.py asks after each session.

A trusted evaluation's speedup interval is over sessions of fresh kernel processes (a process's
own speed, and an autotuner's draw, is one sample per session): each session's speedup is the
mean over cases of the median of that session's pair ratios, and the interval is the
distribution-free interval for their median. arena-report computes the same from the cases'
`pairs_ms` and `pair_sessions` (stats.rs: `session_ratios`, `median_interval`); a test holds the
two equal (crates/arena-report/tests/stopping_rule.rs).

With a stop width set, sessions of one pair each are taken until the interval is no wider than
that fraction of the median, from `least` sessions (five: [min, max] of five holds the median
93.75 % of the time, the interval reports already give) up to `most`. A kernel cannot move its
reading by steering the rule: the rule looks only at the interval's width, never at where it
lies, and a kernel that makes its own times noisy buys itself more sessions, not a higher
median."""

import statistics

LEVEL = 0.95


def median_coverage(n, k):
    """The coverage of the order-statistic interval [x(k), x(n+1-k)] for the median of n values:
    1 - 2 P(Binomial(n, 1/2) < k)."""
    below, c = 0.0, 1.0
    for i in range(min(k, n + 1)):
        if i > 0:
            c = c * (n + 1 - i) / i
        below += c
    return 1.0 - 2.0 * below / 2.0**n


def median_interval(xs, level=LEVEL):
    """The narrowest order-statistic interval of `xs` holding their median at `level` (the
    largest such k), or [min, max] where even that holds less."""
    v = sorted(xs)
    n = len(v)
    if n == 0:
        return None
    k = next((k for k in range((n + 1) // 2, 0, -1) if median_coverage(n, k) >= level), 1)
    return v[k - 1], v[n - k]


def session_ratios(cases):
    """Each session's speedup: `cases` is a list of (pairs, sessions) per case, `pairs` a list
    of (baseline, candidate) seconds and `sessions` the session of each; the mean over cases of
    the median of that session's baseline/candidate. None where the cases do not share their
    sessions or a time is not positive."""
    per_case = []
    for pairs, sessions in cases:
        if len(pairs) != len(sessions) or not pairs:
            return None
        by = {}
        for (b, c), s in zip(pairs, sessions):
            if not (b > 0 and c > 0):
                return None
            by.setdefault(s, []).append(b / c)
        per_case.append(by)
    if not per_case or any(sorted(m) != sorted(per_case[0]) for m in per_case):
        return None
    return [sum(statistics.median(m[s]) for m in per_case) / len(per_case) for s in sorted(per_case[0])]


def width(ratios):
    """The interval's width as a fraction of the sessions' median speedup."""
    lo, hi = median_interval(ratios)
    mid = statistics.median(ratios)
    return (hi - lo) / mid if mid > 0 else float("inf")


def decide(ratios, least, most, target):
    """After len(ratios) sessions: (stop, reason, width). `reason` is "narrow" once `least`
    sessions are in and the interval is no wider than `target`, "cap" at `most` sessions; None
    while more are needed. `ratios` None (no case has pairs left to judge: they failed) stops."""
    if ratios is None:
        return True, "failed", None
    n = len(ratios)
    w = width(ratios) if n >= 2 else None
    if n >= least and w is not None and w <= target:
        return True, "narrow", w
    if n >= most:
        return True, "cap", w
    return False, None, w


def after_session(state, roles, least, most, taken, target):
    """measure.py's question after `taken` sessions, over its per-case `state` (each with its
    `case`, its `times` by role and the `session` of each pair; `roles[0]` the baseline,
    `roles[-1]` the judged kernel): the record each case keeps of the stop, or None while more
    sessions are needed. Judged over the cases still measured; where none is (they all
    failed), there is nothing left to time."""
    live = [st for st in state if "error" not in st["case"]]
    ratios = None
    if live:
        ratios = session_ratios(
            [(list(zip(st["times"][roles[0]], st["times"][roles[-1]])), st["session"]) for st in live]
        )
    done, reason, w = decide(ratios, least, most, target)
    if not done:
        return None
    return {"sessions": taken, "least": least, "most": most, "target": target, "width": w, "reason": reason}
