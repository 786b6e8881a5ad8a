# Classifies `perf script -F comm,ip,sym` output by component (first matching rule, issue 40):
# python3 issue40-classify.py samples.txt [CPU_US_PER_PUT] [-v]
import sys, re, collections
# perf script output: header line then frames, blank line between samples
rules = [
 ("log reclaim (deletes of purged entries)", lambda c,f: c.startswith("raft-log-recl")),
 ("log flush (fdatasync thread)", lambda c,f: c.startswith("raft-log-flush")),
 ("podstore background (resolver/compactor/flush)", lambda c,f: c.startswith("podstore-")),
 ("metrics layer (track)", lambda c,f: "metrics::track" in f),
 ("state machine apply", lambda c,f: "sm::worker" in f or "StateMachine" in f or "state_machine" in f),
 ("log append", lambda c,f: "log_store" in f),
 ("snapshot", lambda c,f: "snapshot" in f.lower()),
 ("replication: HTTP client (reqwest/hyper client)", lambda c,f: ("reqwest" in f or "hyper::client" in f or "hyper_util::client" in f)),
 ("replication/openraft core", lambda c,f: "openraft" in f),
 ("server: raft append RPC handler", lambda c,f: "raft_append" in f),
 ("server: KV API handler", lambda c,f: "http::api" in f),
 ("server: hyper/axum (parse, route, write)", lambda c,f: "hyper" in f or "axum" in f),
 ("client (bench) podstore_raft::client", lambda c,f: "podstore_raft::client" in f),
 ("tokio scheduler / park / wake", lambda c,f: "tokio::runtime" in f),
]
counts = collections.Counter(); total=0
cur_comm=None; frames=[]
def flush():
    global total
    if cur_comm is None: return
    f = "\n".join(frames); total_add=1
    for name, r in rules:
        if r(cur_comm, f):
            counts[name]+=1; break
    else:
        counts["other: "+ (frames[0].strip().split(' ',1)[-1][:60] if frames else "?")]+=1
for line in open(sys.argv[1], errors="replace"):
    if not line.strip():
        flush(); total+=1 if cur_comm else 0; cur_comm=None; frames=[]; continue
    if not line.startswith("\t"):
        cur_comm=line.split()[0]; frames=[]
    else:
        frames.append(line.strip())
flush(); total += 1 if cur_comm else 0
cpu_us = float(sys.argv[2]) if len(sys.argv)>2 else None
other = sum(v for k,v in counts.items() if k.startswith("other"))
for k,v in counts.most_common():
    if k.startswith("other"): continue
    print(f"{100*v/total:5.1f}%  {k}" + (f"  {cpu_us*v/total:5.1f} µs/put" if cpu_us else ""))
print(f"{100*other/total:5.1f}%  other" + (f"  {cpu_us*other/total:5.1f} µs/put" if cpu_us else ""))
print("samples", total)
if "-v" in sys.argv:
    for k,v in counts.most_common(25):
        if k.startswith("other"): print(v,k)
