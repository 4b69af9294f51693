"""Hang verdicts from what was injected (import with sys.path.insert(0, "tests/lib"), or run).

A supervised run's hang incidents (RUN/incidents.jsonl) are matched to the hang and stop
faults the injector fired (RUN/faults-injected.jsonl): each fired fault must have exactly one
hang incident on its rank, in its stage, at its step. A hang incident that matches no fault is
a slow step the timeouts read as a hang (a loaded machine): it is counted and printed, and the
run must still end bit-identical, which the caller checks. Restarts back off twice as long
each time, whatever caused them.

    python3 tests/lib/ft_incidents.py RUN [--backoff B]   checks a run, prints the matches
    python3 tests/lib/ft_incidents.py --selftest          negative controls (tests/compare_nan.sh)
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import check  # noqa: E402


def read_jsonl(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def fault_fields(text):
    """'hang:rank=0,step=20,at=checkpoint' -> ('hang', {'rank': '0', 'step': '20', 'at': 'checkpoint'})."""
    kind, _, rest = text.partition(":")
    return kind, dict(kv.split("=", 1) for kv in rest.split(",") if kv)


def matches(fault, inc):
    kind, f = fault_fields(fault["fault"])
    rank, step = int(f.get("rank", 0)), int(f["step"])
    if inc.get("kind") != "hang" or inc.get("rank") != rank:
        return False
    me = [r for r in inc.get("ranks", []) if r.get("rank") == rank]
    if f.get("at") == "checkpoint":  # hung in the save of `step`
        return inc.get("stage") == "checkpoint" and bool(me) and me[0].get("step") == step
    return inc.get("stage") == "step" and bool(me) and me[0].get("step") == step - 1  # before `step`


def injected_hangs(run, backoff=None):
    """[(fault, incident)] for every fired hang/stop fault, and the unmatched hang incidents."""
    incidents = read_jsonl(os.path.join(run, "incidents.jsonl"))
    fired = [j for j in read_jsonl(os.path.join(run, "faults-injected.jsonl"))
             if fault_fields(j["fault"])[0] in ("hang", "stop")]
    check(fired, f"{run}: no hang or stop fault fired")
    hangs = [i for i in incidents if i.get("kind") == "hang"]
    pairs = []
    for fault in fired:
        m = [i for i in hangs if matches(fault, i)]
        check(len(m) == 1, f"{run}: {len(m)} hang incidents match {fault['fault']} (expected 1)")
        pairs.append((fault, m[0]))
    used = {id(i) for _, i in pairs}
    extra = [i for i in hangs if id(i) not in used]
    if backoff is not None:
        restarts = [i for i in incidents if i.get("restart")]
        for i in restarts:
            want = backoff * 2 ** (i["restart"] - 1)
            check(abs(i.get("backoff_s", -1) - want) < 1e-9,
                  f"{run}: restart {i['restart']} backed off {i.get('backoff_s')} s, expected {want}")
    return pairs, extra


def selftest():
    """A matching run passes; a hang at another step, a missing incident, a doubled incident
    and a backoff that does not double each fail."""
    import subprocess
    import tempfile
    fault = {"fault": "hang:rank=0,step=8", "rank": 0, "step": 8}
    good = {"kind": "hang", "rank": 0, "stage": "step", "ranks": [{"rank": 0, "step": 7}], "restart": 1,
            "backoff_s": 0.05, "step_resumed_from": 5}
    cases = [("match", [good], True), ("other step", [dict(good, ranks=[{"rank": 0, "step": 3}])], False),
             ("none", [], False), ("twice", [good, dict(good, restart=2, backoff_s=0.1)], False),
             ("backoff", [good, dict(good, kind="crash", restart=2, backoff_s=0.05)], False)]
    for name, incidents, ok in cases:
        with tempfile.TemporaryDirectory() as d:
            for fn, rows in (("faults-injected.jsonl", [fault]), ("incidents.jsonl", incidents)):
                with open(os.path.join(d, fn), "w") as f:
                    f.writelines(json.dumps(r) + "\n" for r in rows)
            rc = subprocess.run([sys.executable, os.path.abspath(__file__), d, "--backoff", "0.05"],
                                capture_output=True).returncode
            check((rc == 0) == ok, f"ft_incidents selftest '{name}': exit {rc}")
    print("ft_incidents: negative controls fail as they should")


def main(argv):
    if argv[1] == "--selftest":
        return selftest()
    run = argv[1]
    backoff = float(argv[argv.index("--backoff") + 1]) if "--backoff" in argv else None
    pairs, extra = injected_hangs(run, backoff)
    for fault, inc in pairs:
        print(f"{fault['fault']}: hang incident, stage {inc['stage']}, resumed from step {inc.get('step_resumed_from')}")
    if extra:
        print(f"{len(extra)} hang incident(s) beyond the injected ones (slow steps read as hangs): "
              + "; ".join(f"rank {i.get('rank')} stage {i.get('stage')} step {i.get('step_at_failure')}" for i in extra))


if __name__ == "__main__":
    main(sys.argv)
