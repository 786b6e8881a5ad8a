#!/usr/bin/env bash
# Side-by-side comparison of two builds of podstore on the compare harness's podstore rows:
#   scripts/compare-builds.sh BEFORE_BIN AFTER_BIN [REPS] [OUT.jsonl] [DIR]
# BEFORE_BIN and AFTER_BIN are `compare` binaries built from the two commits, e.g.
#   git worktree add /tmp/before REV
#   cargo build --release --no-default-features --manifest-path /tmp/before/benches/compare/Cargo.toml
# (the harness builds podstore from its own checkout). Each repetition runs every row with both
# binaries back to back, alternating which goes first, so that the machine's load drifts over
# both alike; it then prints per row the medians, the median of the paired after/before ratios
# and their range. DIR must be on the disk to measure (default $PODSTORE_BENCH_DIR or /tmp);
# cold rows drop the page cache, which needs root.
set -euo pipefail
before=${1:?usage: compare-builds.sh BEFORE_BIN AFTER_BIN [REPS] [OUT] [DIR]}
after=${2:?usage: compare-builds.sh BEFORE_BIN AFTER_BIN [REPS] [OUT] [DIR]}
reps=${3:-10}
out=${4:-compare-builds.jsonl}
dir=${5:-${PODSTORE_BENCH_DIR:-/tmp}}
# ROWS (one row of `compare run` arguments per line) replaces the default rows, e.g.
#   ROWS=$'--workload put --size 1M --threads 1\n--workload put --size 1M --threads 8' ...
rows=(
  "--workload put --size 1K --threads 1"
  "--workload put --size 1K --threads 64"
  "--workload put --size 64K --threads 1"
  "--workload get --size 4K --threads 1 --cache cold"
  "--workload get --size 4K --threads 16 --cache cold"
  "--workload range --size 10M --range 0+4K"
  "--workload range --size 100M --range end-4K+4K"
)
if [ -n "${ROWS:-}" ]; then
  mapfile -t rows <<<"$ROWS"
fi
: >"$out"
for r in $(seq 1 "$reps"); do
  for row in "${rows[@]}"; do
    if ((r % 2)); then order="before after"; else order="after before"; fi
    for which in $order; do
      bin=$before
      [ "$which" = after ] && bin=$after
      # shellcheck disable=SC2086 # the row is a list of arguments
      line=$("$bin" run --engine podstore $row --dir "$dir" | tail -1)
      printf '{"which":"%s","rep":%d,"row":"%s","res":%s}\n' "$which" "$r" "$row" "$line" >>"$out"
    done
  done
done
python3 - "$out" <<'PY'
import collections, json, statistics, sys
runs = collections.defaultdict(lambda: collections.defaultdict(dict))
for line in open(sys.argv[1]):
    j = json.loads(line)
    runs[j["row"]][j["rep"]][j["which"]] = j["res"]
print(f"{'row':48} {'before ops/s':>12} {'after ops/s':>12} {'paired':>7} {'range':>11} {'read B/op':>11}")
for row, reps in runs.items():
    pairs = [r for r in reps.values() if "before" in r and "after" in r]
    b = statistics.median(p["before"]["ops_per_sec"] for p in pairs)
    a = statistics.median(p["after"]["ops_per_sec"] for p in pairs)
    ratios = sorted(p["after"]["ops_per_sec"] / p["before"]["ops_per_sec"] for p in pairs)
    rd = statistics.median(p["after"]["disk_read_bytes_per_op"] for p in pairs)
    print(f"{row[11:]:48} {b:12.0f} {a:12.0f} {statistics.median(ratios):7.3f} "
          f"{ratios[0]:5.2f}-{ratios[-1]:<5.2f} {rd:11.0f}")
PY
