#!/usr/bin/env python3
"""Re-test the mutants a cargo-mutants run missed against the whole test suite.

Usage: scripts/mutants-retest.py OUT_DIR [--timeout SECONDS] [--test-arg ARG ...]

OUT_DIR is a cargo-mutants output directory (the `-o DIR` of a run, or its
`mutants.out`). Each mutant its `outcomes.json` records as missed is applied
to this checkout (its diff), tested by `cargo test --workspace` (the
environment tests are #[ignore]d, so skipped), and reverted. A mutant the
smaller run missed is a survivor only if the whole suite misses it too.

Why not cargo-mutants itself: 27.1.0 applies neither `--re` nor
`--exclude-re` to its "delete field ... from struct ... expression"
mutants, so a run selected by exact names also tests every such mutant of
the files given (docs/mutants.md, "A sample of the whole model").

Run it in a copy of its own (it edits the tree); one line per mutant on
stdout (`caught`, `missed`, `timeout` or `unviable`, the seconds, the name) and a
summary at the end; results also in OUT_DIR/retest.json.
"""

import json
import os
import signal
import subprocess
import sys
import time


def outcomes_path(out):
    for p in (os.path.join(out, "outcomes.json"), os.path.join(out, "mutants.out", "outcomes.json")):
        if os.path.exists(p):
            return p
    sys.exit(f"mutants-retest: no outcomes.json in {out!r} (nor in its mutants.out)")


def patch(diff_path, file, reverse):
    args = ["patch", "--quiet", "--forward", "--no-backup-if-mismatch", file, diff_path]
    if reverse:
        args.insert(1, "--reverse")
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"mutants-retest: patch of {file} with {diff_path} failed: {r.stdout.strip()} {r.stderr.strip()}")


def main():
    # Stopped by SIGTERM or SIGINT, revert the mutant being tested first
    # (the `finally` below), so that the copy is left unmutated.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    argv = sys.argv[1:]
    if not argv or argv[0].startswith("-"):
        sys.exit(__doc__.strip().splitlines()[2])
    out = argv[0]
    timeout = 1800
    test_args = []
    i = 1
    while i < len(argv):
        if argv[i] == "--timeout" and i + 1 < len(argv):
            timeout = int(argv[i + 1])
            i += 2
        elif argv[i] == "--test-arg" and i + 1 < len(argv):
            test_args.append(argv[i + 1])
            i += 2
        else:
            sys.exit(f"mutants-retest: unknown argument {argv[i]!r}")
    path = outcomes_path(out)
    base = os.path.dirname(path)
    with open(path) as f:
        data = json.load(f)
    missed = [
        o for o in data["outcomes"]
        if o.get("summary") == "MissedMutant" and isinstance(o.get("scenario"), dict)
    ]
    env = dict(os.environ, CARGO_INCREMENTAL="0", CARGO_PROFILE_TEST_DEBUG="0",
               CARGO_PROFILE_TEST_OPT_LEVEL="1")
    results = []
    for o in missed:
        m = o["scenario"]["Mutant"]
        diff = os.path.join(base, o["diff_path"])
        patch(diff, m["file"], reverse=False)
        t0 = time.monotonic()
        cargo = ["nice", "-n", "15", "cargo", "test", "--workspace", "-q"]
        try:
            # A mutant the smaller run built may not build with every
            # package (a test's const assertion): unviable, not caught.
            b = subprocess.run([*cargo, "--no-run"], env=env, capture_output=True, text=True,
                               timeout=timeout)
            if b.returncode != 0:
                verdict = "unviable"
            else:
                r = subprocess.run([*cargo, *test_args], env=env, capture_output=True, text=True,
                                   timeout=timeout)
                verdict = "missed" if r.returncode == 0 else "caught"
        except subprocess.TimeoutExpired:
            verdict = "timeout"
        finally:
            patch(diff, m["file"], reverse=True)
        secs = time.monotonic() - t0
        results.append({"name": m["name"], "verdict": verdict, "seconds": round(secs, 1)})
        print(f"{verdict:8} {secs:7.1f}s {m['name']}", flush=True)
        with open(os.path.join(base, "retest.json"), "w") as f:
            json.dump(results, f, indent=1)
    n = {v: sum(r["verdict"] == v for r in results) for v in ("caught", "missed", "timeout", "unviable")}
    print(f"{len(results)} re-tested: {n['caught']} caught, {n['missed']} missed, "
          f"{n['timeout']} timeout, {n['unviable']} unviable")


if __name__ == "__main__":
    main()
