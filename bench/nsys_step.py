#!/usr/bin/env python3
"""Where one training step's time goes, from an Nsight Systems export.

Usage: nsys_step.py PROFILE.sqlite [STEP_KERNEL]

A step is the span between two launches of STEP_KERNEL (default: the
AdamW kernel, "adamw"); the last full step is read. For it: each stream's
kernel busy time, the copies by direction (bytes, time, GB/s), the
compute stream's idle gaps over 0.2 ms with the kernel before each and the
copies running then, and the host's CUDA API calls by total time.
"""
import sqlite3
import sys


def main():
    db = sqlite3.connect(sys.argv[1])
    pat = sys.argv[2] if len(sys.argv) > 2 else "adamw"
    tables = {r[0] for r in db.execute("select name from sqlite_master where type='table'")}
    names = dict(db.execute("select id, value from StringIds"))
    kern = [(s, e, st, names.get(n, "?")) for s, e, st, n in
            db.execute("select start, end, streamId, shortName from CUPTI_ACTIVITY_KIND_KERNEL order by start")]
    marks = [s for s, e, st, n in kern if pat in n.lower()]
    # A step's update may be several launches: keep the first of each run.
    starts = [m for i, m in enumerate(marks) if i == 0 or m - marks[i - 1] > 5e6]
    if len(starts) < 3:
        print("fewer than 3 steps marked by", pat, "kernels:", len(starts))
        return
    lo, hi = starts[-2], starts[-1]
    print("step: %.2f ms (between the last two %s launches)" % ((hi - lo) / 1e6, pat))
    busy = {}
    for s, e, st, n in kern:
        if e > lo and s < hi:
            busy[st] = busy.get(st, 0) + min(e, hi) - max(s, lo)
    main_stream = max(busy, key=busy.get)
    for st, b in sorted(busy.items(), key=lambda x: -x[1]):
        print("  stream %d: kernels busy %.2f ms" % (st, b / 1e6))
    copies = []
    if "CUPTI_ACTIVITY_KIND_MEMCPY" in tables:
        kinds = {1: "HtoD", 2: "DtoH", 8: "DtoD", 10: "PtoP"}
        agg = {}
        for s, e, b, k, st in db.execute("select start, end, bytes, copyKind, streamId from CUPTI_ACTIVITY_KIND_MEMCPY"):
            if e > lo and s < hi:
                copies.append((s, e, b, kinds.get(k, str(k)), st))
                a = agg.setdefault((kinds.get(k, str(k)), st), [0, 0, 0])
                a[0] += 1
                a[1] += b
                a[2] += e - s
        for (k, st), (n, b, t) in sorted(agg.items()):
            print("  copies %s stream %d: %d, %.1f MiB, %.2f ms busy, %.1f GB/s" % (k, st, n, b / 2**20, t / 1e6, b / max(t, 1)))
    mk = sorted((s, e, n) for s, e, st, n in kern if st == main_stream and e > lo and s < hi)
    gaps, last, lastn = [], lo, "(step start)"
    for s, e, n in mk:
        if s - last > 2e5:
            gaps.append((s - last, last, lastn, n))
        if e > last:
            last, lastn = e, n
    idle = sum(g[0] for g in gaps)
    print("  stream %d idle in gaps > 0.2 ms: %.2f ms in %d gaps" % (main_stream, idle / 1e6, len(gaps)))
    for g, at, before, after in sorted(gaps, reverse=True)[:12]:
        inflight = [c for c in copies if c[0] < at + g and c[1] > at]
        cb = sum(c[2] for c in inflight)
        print("    %.2f ms at +%.2f ms after %s, before %s; copies in flight %d (%.1f MiB)" %
              (g / 1e6, (at - lo) / 1e6, before[:40], after[:40], len(inflight), cb / 2**20))
    for t in ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER"):
        if t not in tables:
            continue
        agg = {}
        for s, e, n in db.execute("select start, end, nameId from %s" % t):
            if e > lo and s < hi:
                a = agg.setdefault(names.get(n, "?"), [0, 0])
                a[0] += 1
                a[1] += e - s
        print("  host API (%s) by time:" % t.split("_")[-1].lower())
        for n, (c, d) in sorted(agg.items(), key=lambda x: -x[1][1])[:10]:
            print("    %-36s %6d calls %8.2f ms" % (n[:36], c, d / 1e6))


if __name__ == "__main__":
    main()
