"""NaN-proof checks for the Python of the script tests (import with sys.path.insert(0, "tests/lib")).

max() keeps a NaN only when it comes first and `nan > tol` is False, so a hand-rolled maximum
lets a NaN result pass; `assert` vanishes under `python3 -O`. Here every maximum is +inf when
any value on either side is NaN or infinite (or not a number at all), and check() exits
non-zero whatever the interpreter's flags.

    python3 tests/lib/checks.py      runs the negative controls (tests/compare_nan.sh does)
"""
import math
import sys

INF = math.inf


def check(cond, msg="check failed"):
    """Exits 1 with `FAIL: msg` unless cond holds (an assert that -O keeps)."""
    if not cond:
        print(f"FAIL: {msg}", file=sys.stderr)
        sys.exit(1)


def _num(x):
    """x as a float; NaN when it is not a number (None, a bool, text that is no number)."""
    if x is None or isinstance(x, bool):
        return math.nan
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def finite_max(values):
    """The largest value; +inf when any is NaN, infinite or not a number."""
    m = 0.0
    for v in values:
        v = _num(v)
        if not math.isfinite(v):
            return INF
        if v > m:
            m = v
    return m


def max_abs_diff(got, want):
    """Largest |got - want| over pairs; +inf on any non-finite value or a length mismatch."""
    got, want = list(got), list(want)
    if len(got) != len(want):
        return INF
    return finite_max(abs(_num(a) - _num(b)) for a, b in zip(got, want))


def max_rel_diff(got, want, floor=1.0):
    """Largest |got - want| / max(floor, |want|); +inf on any non-finite value or a length mismatch."""
    got, want = list(got), list(want)
    if len(got) != len(want):
        return INF
    return finite_max(abs(a - b) / max(floor, abs(b)) if math.isfinite(b) else INF
                      for a, b in ((_num(x), _num(y)) for x, y in zip(got, want)))


def within(err, tol):
    """err <= tol, false for NaN and infinities."""
    err = _num(err)
    return math.isfinite(err) and err <= tol


def _self_test():
    ok = [1.0, -2.0, 3.0]
    check(max_abs_diff(ok, ok) == 0 and within(max_abs_diff(ok, ok), 0), "agreement")
    check(abs(max_rel_diff([1.0, -2.0, 3.3], ok) - 0.1) < 1e-12, "relative difference")
    check(finite_max([0.5, 2.0, 1.0]) == 2.0, "finite_max")
    check(not within(max_abs_diff([1.0, 2.0], ok), 1e300), "a length mismatch passed")
    check(not within(0.2, 0.1), "over the tolerance passed")
    for bad in (math.nan, INF, -INF, None, "nan"):
        for at in range(3):
            b = list(ok)
            b[at] = bad
            for got, want in ((b, ok), (ok, b), (b, b)):
                for f in (max_abs_diff, max_rel_diff):
                    e = f(got, want)
                    check(e == INF and not within(e, 1e300), f"{f.__name__}: {bad!r} at {at} gave {e}")
            check(finite_max(b) == INF, f"finite_max: {bad!r} at {at}")
        check(not within(bad, 1e300), f"within: {bad!r}")
    print("checks.py: every helper fails on NaN, +inf, -inf and non-numbers")


if __name__ == "__main__":
    _self_test()
