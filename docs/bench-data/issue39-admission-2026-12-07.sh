#!/bin/bash
# Interleaved rounds: for each row, foyer, rocksdb-fifo (16K/64K only), podstore offer, podstore offer+admission.
C=/work/main/benches/compare/target/release/compare
OUT=${OUT:-/work/bench/adm.jsonl}
ROUNDS=${ROUNDS:-2}
ROWS=${ROWS:-"1K:1:600000 1K:8:600000 16K:1:120000 16K:8:120000 64K:1:40000 64K:8:40000"}
EXTRA=${EXTRA:-}
for r in $(seq 1 $ROUNDS); do
 for row in $ROWS; do
  IFS=: read vs th ops <<< "$row"
  CONFS="foyer podstore-offer podstore-adm"
  [ "$vs" != 1K ] && [ -z "$EXTRA" ] && CONFS="$CONFS rocksdb-fifo"
  for conf in $CONFS; do
    d=/work/bench/dir; rm -rf $d; mkdir -p $d
    sync; echo 3 > /proc/sys/vm/drop_caches
    case $conf in
      foyer) args="--engine foyer";;
      rocksdb-fifo) args="--engine rocksdb-fifo";;
      podstore-offer) args="--engine podstore --offer";;
      podstore-adm) args="--engine podstore --offer --admission";;
    esac
    line=$($C cache $args --dir $d --memory 32M --disk 256M --value-size $vs --threads $th --ops $ops $EXTRA 2>/tmp/adm.err | tail -1)
    echo "{\"round\":$r,\"conf\":\"$conf\",\"load\":\"$(cut -d' ' -f1 /proc/loadavg)\",\"res\":$line}" >> $OUT
    echo "$r $conf $vs/$th $(echo "$line" | python3 -c 'import json,sys; j=json.load(sys.stdin); print(round(j.get("ops_per_sec",0)), j.get("hit_ratio"), round(j.get("device_write_amplification",0),2), j.get("p99_us"))' 2>/dev/null)"
  done
 done
done
rm -rf /work/bench/dir
