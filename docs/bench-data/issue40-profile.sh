#!/bin/bash
# Profiles the 64-client 1 KiB put run of `benches/processes.rs` (issue 40): perf on each node
# process and on the bench process for 6 s, /proc/PID/stat and /metrics before and after.
# BENCH_BIN: target/release/deps/processes-<hash> (CARGO_PROFILE_BENCH_DEBUG not needed: dwarf
# unwinding through .eh_frame gives the call chains); OUTDIR: where the files go.
# usage: profile.sh BENCH_BIN OUTDIR  — perf of the nodes and bench during the 64-client put run
BIN=$1; OUT=$2; mkdir -p $OUT
PODSTORE_BENCH_SECS=8 PODSTORE_BENCH_ROUNDS=1 nice -n 5 $BIN > $OUT/bench.txt 2> $OUT/bench.err &
BPID=$!
until grep -q "16 clients done" $OUT/bench.err 2>/dev/null; do sleep 0.2; done
sleep 0.5
NODES=$(pgrep -P $BPID -f podstore-raft)
echo "bench $BPID nodes $NODES" > $OUT/pids
for p in $NODES; do
  port=$(ss -ltnp | grep "pid=$p," | awk '{print $4}' | sed 's/.*://')
  echo "$p $port" >> $OUT/pids
  curl -s localhost:$port/metrics > $OUT/m0-$p.txt
done
grep -h '^podstore_raft_http_requests_total' $OUT/m0-*.txt >/dev/null
for p in $BPID $NODES; do
  perf record -F 499 --call-graph dwarf,16384 -p $p -o $OUT/perf-$p.data -- sleep 6 > /dev/null 2>&1 &
done
for p in $NODES; do cat /proc/$p/stat | awk '{print $14, $15}' > $OUT/cpu0-$p; done
sleep 6.5
for p in $NODES; do
  port=$(grep "^$p " $OUT/pids | cut -d' ' -f2)
  curl -s localhost:$port/metrics > $OUT/m1-$p.txt
  cat /proc/$p/stat | awk '{print $14, $15}' > $OUT/cpu1-$p
done
wait
