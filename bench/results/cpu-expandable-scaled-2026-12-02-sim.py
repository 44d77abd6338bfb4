"""Idealised physical-page sharing on PyTorch's traces (issue 12, 2026-12-02).

Not the pool: a model of what sharing 2 MiB physical pages between
virtual places could reach at best with greedy online placement. Every
page is a byte space; a block of n bytes takes a sub-page interval of any
page (best fit) when n < 2 MiB, else a head [2 MiB - h, 2 MiB) of one
page's free right part, whole free pages, and a tail [0, t) of another
page's free left part or of a new page (the options that create the
fewest pages, then leave the least new free tail minus the part used).
Virtual addresses cost nothing: any combination is one contiguous block.
Prints reserved/requested (pages ever held at once over the peak of the
requested bytes) per scale. Run from the repository root:

    python3 bench/results/cpu-expandable-scaled-2026-12-02-sim.py 0.25,0.5,1 1

(the last argument 0 forbids the two-page spans of small blocks and the
shared tails: heads only.)
"""
import sys, math, bisect
G = 2 << 20
def load(name):
    ev=[l.strip().split(',') for l in open(f'bench/traces/trace-char-{name}.csv')][1:]
    live={}; ops=[]
    for a,addr,sz,st in ev:
        if a=='alloc': live[addr]=len(ops); ops.append(('a',int(sz),len(ops)))
        elif a=='free_completed' and addr in live: ops.append(('f',live.pop(addr),0))
    return ops

def rnd(n): return max(512,(n+511)//512*512)

class Page:
    __slots__=('free',)  # sorted list of [lo,hi) free intervals
    def __init__(s): s.free=[[0,G]]
    def used(s): return G-sum(h-l for l,h in s.free)
    def take(s,l,h):
        for i,(a,b) in enumerate(s.free):
            if a<=l and h<=b:
                new=[]
                if a<l: new.append([a,l])
                if h<b: new.append([h,b])
                s.free[i:i+1]=new; return
        raise Exception('not free')
    def give(s,l,h):
        s.free.append([l,h]); s.free.sort()
        m=[]
        for a,b in s.free:
            if m and m[-1][1]==a: m[-1][1]=b
            else: m.append([a,b])
        s.free=m
    def right(s): return G-s.free[-1][0] if s.free and s.free[-1][1]==G else 0
    def left(s): return s.free[0][1] if s.free and s.free[0][0]==0 else 0

def sim(ops, scale, share_tail=True):
    pages=[]; blocks={}; peakreq=0; req=0; reserved=0
    def fresh():
        nonlocal reserved
        for p in pages:
            if p.used()==0: return p
        p=Page(); pages.append(p); reserved=max(reserved,len(pages)); return p
    for op in ops:
        if op[0]=='f':
            frs,n=blocks.pop(op[1]); req-=n
            for p,l,h in frs: p.give(l,h)
            continue
        n0=max(1,round(op[1]*scale)); req+=n0; peakreq=max(peakreq,req); n=rnd(n0)
        frs=[]
        partial=[p for p in pages if 0<p.used()<G]
        if n<G:
            best=None
            for p in partial:
                for a,b in p.free:
                    if b-a>=n and (best is None or b-a<best[0]): best=(b-a,p,a)
            if best:
                _,p,a=best; p.take(a,a+n); frs=[(p,a,a+n)]
            else:
                # span right part of A + left part of B
                done=False
                if share_tail:
                    rs=sorted([(p.right(),id(p),p) for p in partial if p.right()>0])
                    ls=[(p.left(),id(p),p) for p in partial if p.left()>0]
                    for r,_,A in rs:
                        t=n-r
                        c=[(l,id(B),B) for l,_,B in ls if B is not A and l>=t]
                        if c:
                            l,_,B=min(c, key=lambda x:x[0])
                            A.take(G-r,G); B.take(0,t); frs=[(A,G-r,G),(B,0,t)]; done=True; break
                if not done:
                    p=fresh(); p.take(0,n); frs=[(p,0,n)]
        else:
            # choose head h from right parts (or 0), tail from left parts or fresh
            opts=[]
            heads=[(0,None)]+[(p.right(),p) for p in partial if p.right()>0]
            lefts=[(p.left(),p) for p in partial if p.left()>0]
            for h,A in heads:
                rest=n-h; k=rest//G; t=rest-k*G
                if t==0: opts.append((k,-h,h,A,None,t)); continue
                cand=[(l,B) for l,B in lefts if B is not A and l>=t] if share_tail else []
                if cand:
                    l,B=min(cand,key=lambda x:x[0]); opts.append((k,-h,h,A,B,t))
                else:
                    opts.append((k+1,G-t-h,h,A,None,t))
            opts.sort(key=lambda o:(o[0],o[1]))
            k,_,h,A,B,t=opts[0]
            if A: A.take(G-h,G); frs.append((A,G-h,G))
            rest=n-h; kk=rest//G
            for i in range(kk):
                p=fresh(); p.take(0,G); frs.append((p,0,G))
            if t:
                if B is None: B=fresh()
                B.take(0,t); frs.append((B,0,t))
        blocks[op[2]]=(frs,n0)
    return reserved*G/peakreq

for name in ['fp32','fp16-ckpt']:
    ops=load(name)
    out=[]
    for s in [float(x) for x in sys.argv[1].split(',')]:
        out.append('%g:%.4f'%(s,sim(ops,s,sys.argv[2]=='1')))
    print(name,' '.join(out))
