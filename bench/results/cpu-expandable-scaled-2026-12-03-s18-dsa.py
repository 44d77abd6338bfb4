# Oracle bound (session 18): every block's lifetime known in advance, the
# whole trace laid out offline by greedy by size (TFLite's arena planner,
# XLA's heap simulator): the peak over time of the 2 MiB pages touched by
# live blocks, over peak requested.
# Usage: python3 THIS TRACE.csv {40|60}
import sys, math
f=sys.argv[1]
scales=[0.2*20**(i/39) for i in range(40)] if sys.argv[2]=='40' else [0.21*(3.8/0.21)**((i+0.37)/60) for i in range(60)]
def run(scale):
    P=2<<20
    lines=open(f).read().split('\n')[1:]
    live={}; blocks=[]; t=0
    for l in lines:
        if not l: continue
        a,addr,size,s=l.split(',')
        if a=='alloc':
            sz=max(1,round(int(size)*scale)); r=(sz+511)//512*512
            live[addr]=len(blocks); blocks.append([t,None,r,sz]); t+=1
        elif a=='free_completed' and addr in live:
            blocks[live.pop(addr)][1]=t; t+=1
    for b in blocks:
        if b[1] is None: b[1]=t+1
    # requested peak
    ev=[]
    for b in blocks: ev.append((b[0],b[3])); ev.append((b[1],-b[3]))
    ev.sort(); cur=0; pk=0
    for _,d in ev: cur+=d; pk=max(pk,cur)
    # greedy by size
    order=sorted(range(len(blocks)),key=lambda i:(-blocks[i][2],blocks[i][0]))
    placed=[]; off=[0]*len(blocks)
    for i in order:
        s,e,r,_=blocks[i]
        ov=sorted((off[j],off[j]+blocks[j][2]) for j in placed if blocks[j][0]<e and s<blocks[j][1])
        o=0
        for lo,hi in ov:
            if o+r<=lo: break
            o=max(o,hi)
        off[i]=o; placed.append(i)
    ext=max(off[i]+blocks[i][2] for i in range(len(blocks)))
    # pages touched over time
    tev=sorted(set([b[0] for b in blocks]))
    best=0
    for tt in tev:
        pages=set()
        for i,b in enumerate(blocks):
            if b[0]<=tt<b[1]:
                pages.update(range(off[i]//P,(off[i]+b[2]-1)//P+1))
        best=max(best,len(pages))
    return ext/pk, best*P/pk

rs=[]
for sc in scales:
    e,r=run(sc); rs.append(r); print('%.3g extent %.4f pages %.4f'%(sc,e,r), flush=True)
print('%s: pages/requested mean %.4f max %.4f above 1.02: %d/%d'%(f,sum(rs)/len(rs),max(rs),sum(1 for r in rs if r>1.02),len(rs)))
