#!/usr/bin/env python3
"""Runs one `cargo bench` program several times and prints the median and the spread of each figure of its last
JSON line (the daemon and rollouts benches end with one), so runs can be compared as issue 34 asks.

    python3 tests/bench/repeat.py --runs 3 rollouts CANARYD_BENCH_ROLLOUTS=2000

Each run's whole output is kept in the directory given by --keep (default: a new temporary one), and each run's
JSON line is printed as it ends.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def last_json(text):
    """The last line of `text` that is a JSON object, or None."""
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                continue
    return None


def flat(figures, prefix=""):
    """`figures` with nested objects' keys joined by dots."""
    out = {}
    for key, value in figures.items():
        if isinstance(value, dict):
            out.update(flat(value, f"{prefix}{key}."))
        else:
            out[prefix + key] = value
    return out


def summary(runs):
    """{key: (median, min, max)} of the numeric figures every run has; other values as the runs gave them."""
    runs = [flat(run) for run in runs]
    figures = {}
    for key in runs[0]:
        values = [run.get(key) for run in runs]
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            figures[key] = (statistics.median(values), min(values), max(values))
        else:
            figures[key] = values
    return figures


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--keep", help="directory for each run's output")
    parser.add_argument("bench", help="the bench's name: rollouts, daemon, ...")
    parser.add_argument("env", nargs="*", help="NAME=VALUE settings for the bench")
    args = parser.parse_args()
    env = dict(os.environ)
    for setting in args.env:
        name, sep, value = setting.partition("=")
        if not sep:
            parser.error(f"{setting!r} is not NAME=VALUE")
        env[name] = value
    keep = args.keep or tempfile.mkdtemp(prefix=f"canaryd-bench-{args.bench}-")
    os.makedirs(keep, exist_ok=True)
    runs = []
    for n in range(1, args.runs + 1):
        done = subprocess.run(["cargo", "bench", "--bench", args.bench], env=env, capture_output=True, text=True)
        with open(os.path.join(keep, f"run{n}.txt"), "w") as out:
            out.write(done.stdout + done.stderr)
        figures = last_json(done.stdout)
        if done.returncode != 0 or figures is None:
            print(f"run {n}: exit {done.returncode}, no JSON line; output in {keep}/run{n}.txt", file=sys.stderr)
            return 1
        print(f"run {n}: {json.dumps(figures, sort_keys=True)}")
        runs.append(figures)
    print(f"{args.bench} {' '.join(args.env)}: {len(runs)} runs (outputs in {keep})")
    for key, value in sorted(summary(runs).items()):
        if isinstance(value, tuple):
            median, low, high = value
            print(f"  {key:<40} median {median:g}  spread {low:g} .. {high:g}")
        else:
            print(f"  {key:<40} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
