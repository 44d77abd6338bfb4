#!/usr/bin/env python3
"""Sum Nsight Compute's per-kernel durations into a markdown table.

Input: the CSV of `ncu --metrics gpu__time_duration.sum --csv
--print-units base PROGRAM` (other lines, such as the program's own output
and ncu's ==PROF== lines, are skipped). With --last-step REGEX[:K] only the
kernels from the K-th last match of REGEX on (K defaults to 1) are summed:
the last training step when REGEX names the step's first kernel.

Output: total GPU time, the share of matrix-product kernels, kernels
grouped by name (calls, total ms, share, mean us), biggest first.
"""
import argparse
import collections
import csv
import re
import sys

GEMM = re.compile(r"gemm|cutlass|xmma|nvjet|sm90_|sm80_|ampere_|cublas", re.I)


def short(name, width=90):
    name = re.sub(r"\(.*$", "", name) if name.startswith("void ") else name
    name = name.replace("void ", "")
    return name if len(name) <= width else name[: width - 3] + "..."


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--last-step", default="", help="REGEX[:K]: start at the K-th last kernel matching REGEX")
    ap.add_argument("--top", type=int, default=40)
    a = ap.parse_args()
    rows = []
    with open(a.csv, newline="", errors="replace") as f:
        lines = [ln for ln in f if ln.startswith('"')]
    for r in csv.DictReader(lines):
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        try:
            v = float(r["Metric Value"].replace(",", ""))
        except ValueError:
            continue
        rows.append((r["Kernel Name"], v))
    if not rows:
        sys.exit("ncu_table: no gpu__time_duration rows in " + a.csv)
    note = "all %d kernels of the run" % len(rows)
    if a.last_step:
        pat, _, k = a.last_step.partition(":")
        k = int(k or 1)
        idx = [i for i, (n, _) in enumerate(rows) if re.search(pat, n)]
        if len(idx) >= k:
            rows = rows[idx[-k]:]
            note = "the last step: %d kernels from the %s match of /%s/" % (len(rows), "last" if k == 1 else "%d-th last" % k, pat)
        else:
            note += " (no step marker /%s/ found)" % pat
    total = sum(v for _, v in rows)
    by = collections.OrderedDict()
    for n, v in rows:
        e = by.setdefault(short(n), [0, 0.0])
        e[0] += 1
        e[1] += v
    gemm = sum(v for n, v in rows if GEMM.search(n))
    print("Kernels: %s. GPU time %.2f ms in %d launches; matrix-product kernels %.1f%%.\n" % (note, total / 1e6, len(rows), 100 * gemm / total))
    print("| kernel | calls | total ms | share | mean us |")
    print("|---|---:|---:|---:|---:|")
    for n, (c, v) in sorted(by.items(), key=lambda kv: -kv[1][1])[: a.top]:
        print("| %s | %d | %.3f | %.1f%% | %.1f |" % (n.replace("|", "/"), c, v / 1e6, 100 * v / total, v / c / 1e3))


if __name__ == "__main__":
    main()
