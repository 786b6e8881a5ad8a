#!/bin/bash
# The loops of docs/benchmarks.md, "A disk cache against foyer and RocksDB FIFO", 2026-12-08 02:15-03:15 UTC.
# compare-final: benches/compare built at 59349d1 (cargo build --release --features foyer,rocksdb).
# dec.sh (below) runs ROUNDS rounds of ROWS (size:threads:ops), each row its CONFS (binary:kind) interleaved,
# the page cache dropped before each run; the invocations that made the four .jsonl files:
#   ALL="1K:1:600000 1K:8:600000 16K:1:120000 16K:8:120000 64K:1:40000 64K:8:40000"
#   ROUNDS=2 ROWS="$ALL" CONFS="final:foyer final:adm final:admsc" OUT=/work/bench/final-ttl.jsonl ./dec.sh
#   ROUNDS=1 ROWS="1K:1:600000 1K:8:600000" CONFS="final:foyer final:adm final:admsc" TTLARG="" OUT=/work/bench/final-zipf.jsonl ./dec.sh
#   ROUNDS=1 ROWS="16K:1:120000 16K:8:120000 64K:1:40000 64K:8:40000" CONFS="final:foyer final:rocksdb final:adm final:admsc" TTLARG="" OUT=/work/bench/final-zipf.jsonl ./dec.sh
#   ROUNDS=1 ROWS="64K:1:400000 16K:8:1200000 64K:8:400000" CONFS="final:foyer final:admsc" OUT=/work/bench/final-long.jsonl ./dec.sh
#   ROUNDS=1 ROWS="1K:1:600000 1K:8:600000" CONFS="final:foyer final:adm final:admsc" TTLARG="" OUT=/work/bench/final-zipf.jsonl ./dec.sh
#   ROUNDS=1 ROWS="16K:1:120000 16K:8:120000 64K:1:40000 64K:8:40000" CONFS="final:foyer final:rocksdb final:adm final:admsc" TTLARG="" OUT=/work/bench/final-zipf.jsonl ./dec.sh
#   ROUNDS=2 ROWS="1K:1:600000" CONFS="final:put" TTLARG="" OUT=/work/bench/final-wa.jsonl ./dec.sh
#   ROUNDS=1 ROWS="1K:1:6000000" CONFS="final:put" TTLARG="" OUT=/work/bench/final-wa.jsonl ./dec.sh
# (then a third round of the zipfian rows and of the TTL rows, as above with ROUNDS=1)

# ---- dec.sh ----
# decomposition runs: CONFS of foyer / BIN:adm ; ROWS vs:th:ops
OUT=${OUT:-/work/bench/dec.jsonl}
for r in $(seq 1 ${ROUNDS:-1}); do
for row in $ROWS; do IFS=: read vs th ops <<< "$row"
for conf in $CONFS; do
  d=/work/bench/dir; rm -rf $d; mkdir -p $d; sync; echo 3 > /proc/sys/vm/drop_caches
  bin=${conf%%:*}; kind=${conf#*:}
  case $kind in foyer) a="--engine foyer";; adm) a="--engine podstore --offer --admission";; admsc) a="--engine podstore --offer --admission --second-chance";; offer) a="--engine podstore --offer";; put) a="--engine podstore";; rocksdb) a="--engine rocksdb-fifo";; esac
  line=$(/work/bench/compare-$bin cache $a --dir $d --memory 32M --disk 256M --value-size $vs --threads $th --ops $ops ${TTLARG---ttl-fraction 0.5} 2>/dev/null | tail -1)
  echo "{\"round\":$r,\"conf\":\"$conf\",\"res\":$line}" >> $OUT
  echo "$line" | python3 -c 'import json,sys; j=json.load(sys.stdin); g=j["ops"]; tg=j.get("ttl_gets",0) or 1; th=j.get("ttl_hits",0); h=j["hit_ratio"]*g; s=j.get("engine_stats") or {}; print("'$r' '$conf' '$vs/$th'", round(j["ops_per_sec"]), round(j["hit_ratio"],3), "ttl", round(th/tg,3), "plain", round((h-th)/max(1,g-tg),3), "ttl_ops", round(j.get("ttl_ops") or 0), s.get("offers_dropped"), s.get("offers_not_admitted"), s.get("offers_refused_ttl"), s.get("offers_refused_plain"), s.get("expired_keys"), s.get("live_keys"), j.get("diag"))'
done; done; done
rm -rf /work/bench/dir
