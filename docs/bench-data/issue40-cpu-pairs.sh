#!/bin/bash
# usage: BENCH_BIN=target/release/deps/processes-<hash> issue40-cpu-pairs.sh OUTFILE LABEL:NODE_BIN ... — the processes bench (64/16/1 clients, small values) once per node binary, in the order given
out=$1; shift
for lb in "$@"; do
  label=${lb%%:*}; bin=${lb#*:}
  echo "=== $label $bin $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)" >> $out
  PODSTORE_BENCH_LARGE=0 PODSTORE_BENCH_NODE_BIN=$bin nice -n 5 ${BENCH_BIN:?the processes bench binary} >> $out 2>/dev/null
  echo "=== end $label $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)" >> $out
done
