#!/bin/bash
# usage: threads.sh BENCH_BIN NODE_BIN OUTDIR — CPU per thread of each node over 6 s of the 64-client put run
BIN=$1; NODE=$2; OUT=$3; mkdir -p $OUT
PODSTORE_BENCH_NODE_BIN=$NODE PODSTORE_BENCH_LARGE=0 PODSTORE_BENCH_SECS=8 PODSTORE_BENCH_ROUNDS=1 nice -n 5 $BIN > $OUT/bench.txt 2> $OUT/bench.err &
BPID=$!
until grep -q "16 clients done" $OUT/bench.err 2>/dev/null; do sleep 0.2; done
sleep 0.5
NODES=$(pgrep -P $BPID)
snap() { for p in $NODES; do port=$(ss -ltnp | grep "pid=$p," | awk '{print $4}' | sed 's/.*://' | head -1); echo "node $p $(curl -s localhost:$port/metrics | grep '^podstore_raft_http_requests_total' | grep -i put | awk '{s+=$NF} END {print s+0}')"; for t in /proc/$p/task/*; do echo "$p $(cat $t/comm 2>/dev/null | tr ' ' _) $(awk '{print $14+$15}' $t/stat 2>/dev/null)"; done; done; }
snap > $OUT/t0; sleep 6; snap > $OUT/t1
wait
python3 - $OUT <<'PY'
import sys, collections
out=sys.argv[1]
def load(f):
    d=collections.Counter(); puts={}
    for l in open(f):
        p=l.split()
        if p[0]=="node": puts[p[1]]=float(p[2]); continue
        if len(p)!=3: continue  # a thread that ended while it was read
        pid,comm,t=p; name=comm.rstrip('0123456789-')
        d[(pid,name)]+=int(t)
    return d,puts
a,pa=load(out+"/t0"); b,pb=load(out+"/t1")
hz=100
n=max(pb[q]-pa[q] for q in pa)
print(f"puts answered by the leader in the window: {n:.0f}")
for pid in sorted(pa):
    rows={k[1]:(b[k]-a.get(k,0)) for k in b if k[0]==pid}
    tot=sum(rows.values())
    print(f"node {pid}: CPU {tot/hz:.2f} s, {tot/hz*1e6/max(n,1):.1f} us per put")
    for k,v in sorted(rows.items(), key=lambda x:-x[1]):
        if v: print(f"   {k:24s} {v/hz:6.2f} s {100*v/max(tot,1):5.1f} %")
PY
