#!/usr/bin/env python3
"""Compares scale sweeps of the memory package side by side.

Each FILE is the output of

    go test ./memory -run TestExpandableScaleSweep -v -expandable-sweep 40 \
        -expandable-sweep-traces all -expandable-sweep-plan

(or a test binary's, as bench/results/cpu-firsts-s40/ were made). For each
trace and each file it prints the replays above 1.02 peak reserved /
requested, their mean and their max, then the totals: how a placement
change is judged over many scales before the live gate on the GPU.

    python3 bench/sweep_compare.py BEFORE.txt AFTER.txt [...]
"""
import re
import sys


def load(path):
    """Returns {trace: [ratio at each scale]} from one sweep's output."""
    ratios, name = {}, None
    with open(path) as f:
        for line in f:
            m = re.match(r"\s*(\S+\.csv) mean", line)
            if m:
                name = m.group(1)
                continue
            if name and ":" in line and line.startswith(" "):
                ratios[name] = [float(x.split(":")[1]) for x in line.split()]
                name = None
    return ratios


def cell(values):
    above = sum(1 for v in values if v > 1.02)
    return "%3d %.4f %.4f" % (above, sum(values) / len(values), max(values))


def main(paths):
    if not paths:
        sys.exit(__doc__)
    sweeps = [load(p) for p in paths]
    print("| trace | " + " | ".join(p.split("/")[-1] for p in paths) + " |")
    print("|---|" + "---:|" * len(paths))
    every = [[] for _ in paths]
    for trace in sweeps[0]:
        cells = []
        for i, sweep in enumerate(sweeps):
            values = sweep.get(trace, [])
            every[i] += values
            cells.append(cell(values) if values else "-")
        print("| %s | %s |" % (trace, " | ".join(cells)))
    print("| all (above 1.02, mean, max) | %s |" % " | ".join(cell(v) for v in every if v))


if __name__ == "__main__":
    main(sys.argv[1:])
