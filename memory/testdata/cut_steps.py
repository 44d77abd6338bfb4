# cut_steps.py IN.gz OUT.gz STEPS TOTAL (the run's steps): the steps log IN cut after its setup and
# first STEPS steps; prints the period (calls a step), the setup's calls and
# the cut's length. The period is the smallest P whose last P calls repeat
# the P before them (sizes, streams, roles; ids differ).
import gzip, sys
lines = gzip.open(sys.argv[1], 'rt').read().splitlines()
ids = {}
sig = []
for l in lines:
    w = l.split()
    if w[0] == 'a':
        ids[w[1]] = len(sig)
        sig.append(('a',) + tuple(w[2:]))
    else:
        sig.append(('f', len(sig) - ids[w[1]]))  # distance back to its alloc
n = len(sig)
P = next(p for p in range(100, n // 3) if sig[n-p:] == sig[n-2*p:n-p] and sig[n-2*p:n-p] == sig[n-3*p:n-2*p])
# walk back while whole steps repeat
k = 1
while n - (k+1)*P >= 0 and sig[n-(k+1)*P:n-k*P] == sig[n-P:]:
    k += 1
setup = n - k*P
steps, total = int(sys.argv[3]), int(sys.argv[4])
cut = n - (total-steps)*P
assert total - k <= steps, 'fewer regular steps than the cut keeps'
print(f"calls {n} period {P} repeated steps at the end {k} setup+irregular {setup} cut {cut}")
with gzip.open(sys.argv[2], 'wt') as f:
    f.write('\n'.join(lines[:cut]) + '\n')
