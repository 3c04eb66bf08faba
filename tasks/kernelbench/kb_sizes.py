"""Which sizes a converted problem is checked at: a base configuration where the reference
matches the Model, and the [check] configurations built from what probe_dim() found."""
import time

from kb_check import ConfigFailed
from kb_load import Unconvertible

CHECK_DIMS_BYTES = 16 << 20    # [check] configurations are kept below this...
CHECK_SECONDS = 10             # ...and this many seconds for the Model and the reference on the CPU


def small(v):
    """A small stand-in for a size that keeps its factors of two: 4096 -> 8, 96 -> 12, 3 -> 3,
    and an odd large one: 8205 -> 17."""
    while v % 2 == 0 and v // 2 >= 8:
        v //= 2
    return v if v <= 64 else 17


def fmt(config):
    return ", ".join(f"{k}={v}" for k, v in sorted(config.items())) or "no sizes"


def find_base(problem, base, timed, shape_dims, limit):
    """A configuration where the reference matches the Model: the small one, else it scaled up
    (pooling and convolutions need room), else the timed sizes; the first that fits `limit` and
    matches."""
    candidates = [base] + [{n: min(timed[n], v * k) for n, v in base.items()} for k in (2, 4, 8, 16, 32, 64)]
    # One size at its timed value, the others small (a size tied to a fixed one).
    candidates += [dict(base, **{n: timed[n]}) for n in base if base[n] != timed[n]]
    # The timed sizes divided alike keep their ratios (a LayerNorm over as many features as another
    # size happens to have); smallest first.
    fixed = {n for n, v in base.items() if v == timed[n]}
    for shift in range(16, 0, -1):
        s = 1 << shift
        candidates.append({n: timed[n] // s if n not in fixed and timed[n] % s == 0 else timed[n] for n in base})
    candidates.append({n: timed[n] for n in base})
    tried, model_fails, last = [], False, ""
    for cfg in candidates:
        if cfg in tried or problem.bytes_at(cfg) > limit:
            continue
        tried.append(cfg)
        try:
            why = problem.try_config(cfg, twice=True)
            model_fails = False
        except ConfigFailed as e:
            why, model_fails = str(e), True
        if why is None:
            return cfg, None
        last = f"at {fmt(cfg)}: {why}"
        if not shape_dims:
            break
    if not tried:
        raise Unconvertible(f"even its smallest sizes move more than {limit / 1e6:.0f} MB; `--device cuda` checks it on a GPU")
    if problem.bytes_at({n: timed[n] for n in base}) > limit:
        last += f"; the timed sizes are too large to check here ({problem.bytes_at({}) / 1e6:.0f} MB): try `--device cuda`"
    if model_fails:
        raise Unconvertible(f"the Model fails at every size checked here, {last}")
    raise Unconvertible("the converted reference differs from the Model " + last)


ODD = [3, 5, 7, 9, 11, 13, 15, 17, 19, 21]
MEDIUM = [37, 31, 41, 29, 43, 23, 47, 53]


def round_to(v, m, q, top):
    v = max(v, m)
    v = -(-v // q) * q
    return min(v, top)


def check_configs(problem, variable, rules, timed, notes):
    """[check] configurations: every size at its smallest, small odd sizes, medium ones; each kept
    only where the reference matches the Model."""
    if not variable:
        return [], []
    wanted = [
        {n: round_to(1, *rules[n], timed[n]) for n in variable},
        {n: round_to(rules[n][1] * ODD[i % len(ODD)], *rules[n], timed[n]) for i, n in enumerate(variable)},
        {n: round_to(rules[n][1] * max(1, MEDIUM[i % len(MEDIUM)] // rules[n][1]), *rules[n], timed[n])
         for i, n in enumerate(variable)},
    ]
    out = []
    for cfg in wanted:
        while problem.bytes_at(cfg) > CHECK_DIMS_BYTES:
            big = max(cfg, key=lambda n: cfg[n] if cfg[n] > rules[n][0] else 0)
            if cfg[big] <= rules[big][0]:
                break
            cfg[big] = round_to(cfg[big] // 2, *rules[big], timed[big])
        if cfg in out or cfg == {n: timed[n] for n in variable} or problem.bytes_at(cfg) > CHECK_DIMS_BYTES:
            continue
        start = time.monotonic()
        try:
            why = problem.try_config(cfg)
        except ConfigFailed as e:
            why = str(e)
        seconds = time.monotonic() - start
        if why is None and seconds > CHECK_SECONDS:
            why = f"the Model and the reference took {seconds:.0f} s here (kforge checks every [check] configuration)"
        if why is None:
            out.append(cfg)
        elif cfg is wanted[0] and any(v == 1 for v in cfg.values()):
            wanted.insert(1, {n: round_to(2, *rules[n], timed[n]) for n in variable})  # size 2 instead
            notes.append(f"check sizes {fmt(cfg)} left out: {why}")
        else:
            notes.append(f"check sizes {fmt(cfg)} left out: {why}")
    return out, list(out)
