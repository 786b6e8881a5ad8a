#!/usr/bin/env bash
# Fuzzes podstore's on-disk decoders: fuzz/run.sh [SECONDS_PER_TARGET] (default 60).
#
# Needs a nightly toolchain; installs cargo-fuzz if it is missing. Builds the targets, writes seed
# corpora from valid encoded structures into fuzz/corpus/<target>/, runs each target for
# SECONDS_PER_TARGET and prints a summary. Exits non-zero if any target crashed (a panic, a
# sanitizer report, a timeout, or a single allocation over the malloc limit below).
# Logs: fuzz/target/run-logs/<target>.log; crash inputs: fuzz/artifacts/<target>/.
set -euo pipefail
cd "$(dirname "$0")/.."

secs="${1:-60}"
case "$secs" in
  '' | *[!0-9]*)
    echo "usage: fuzz/run.sh [SECONDS_PER_TARGET]" >&2
    exit 2
    ;;
esac
targets=(record footer segment_header scan frames catalog versions manifest prefix_record)
# No input may make a target allocate more than this in one go (the decoders bound every
# length they read; the largest legitimate buffer is a ~3 MiB generated segment image).
malloc_limit_mb=32

step() { printf '\n==> %s\n' "$*"; }
started=$SECONDS

step "fuzz: toolchain"
if ! rustup toolchain list 2>/dev/null | grep -q nightly; then
  echo "fuzz/run.sh needs a nightly toolchain: rustup toolchain install nightly" >&2
  exit 1
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  echo "cargo-fuzz not found: installing it"
  cargo install cargo-fuzz --locked
fi
cargo +nightly --version
cargo +nightly fuzz --version

step "fuzz: build targets"
# Builds every bin of fuzz/, the seed generator included, with the fuzzing flags: one build of
# the dependencies serves both.
cargo +nightly fuzz build
host=$(rustc +nightly -vV | sed -n 's/^host: //p')
bin_dir="fuzz/target/$host/release"

step "fuzz: seed corpora"
"$bin_dir/gen_corpus" fuzz/corpus

# The value of one of libFuzzer's final stats (-print_final_stats=1) in log $2.
final_stat() { sed -n "s/^stat::$1: *//p" "$2" | tail -n 1; }

log_dir=fuzz/target/run-logs
mkdir -p "$log_dir"
declare -A result execs rate new_units rss
failed=0
for t in "${targets[@]}"; do
  step "fuzz: $t for ${secs}s"
  log="$log_dir/$t.log"
  if cargo +nightly fuzz run "$t" -- \
    -max_total_time="$secs" -rss_limit_mb=2048 -malloc_limit_mb="$malloc_limit_mb" \
    -timeout=30 -print_final_stats=1 >"$log" 2>&1; then
    result[$t]=ok
  else
    result[$t]=CRASH
    failed=1
    echo "--- $t failed; end of $log:"
    tail -n 40 "$log"
    artifact=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)
    if [ -n "$artifact" ]; then
      echo "--- reproduce: cargo +nightly fuzz run $t $artifact"
    fi
  fi
  execs[$t]=$(final_stat number_of_executed_units "$log")
  rate[$t]=$(final_stat average_exec_per_sec "$log")
  new_units[$t]=$(final_stat new_units_added "$log")
  rss[$t]=$(final_stat peak_rss_mb "$log")
  echo "$t: ${result[$t]}, ${execs[$t]:-?} executions"
done

step "fuzz: summary (${secs}s per target, $((SECONDS - started))s in all)"
printf '%-16s %-6s %12s %9s %10s %9s\n' target result executions exec/s new-units rss-MiB
for t in "${targets[@]}"; do
  printf '%-16s %-6s %12s %9s %10s %9s\n' "$t" "${result[$t]}" "${execs[$t]:-?}" \
    "${rate[$t]:-?}" "${new_units[$t]:-?}" "${rss[$t]:-?}"
done
if [ "$failed" -ne 0 ]; then
  echo "fuzz: a target crashed: see above, $log_dir/ and fuzz/artifacts/" >&2
  exit 1
fi
