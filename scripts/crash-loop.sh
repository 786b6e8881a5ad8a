#!/usr/bin/env bash
# Runs the kill -9 crash tests (tests/crash/kill9.rs, `kill9::kill9_*`) again and again, each
# time with another seed, for long runs: every run kills a writing child PODSTORE_CRASH_ROUNDS
# times per test, at other points of other workloads. Stops at the first failure (exit 1) and says how
# to reproduce it; at the end prints the totals of the tests' `crash-summary` lines.
#
# usage: scripts/crash-loop.sh [RUNS] [TEST_FILTER]
#   RUNS                   number of runs (default 20)
#   TEST_FILTER            libtest filter (default kill9_: all eight kill -9 tests, compaction and
#                          eviction too)
# environment:
#   PODSTORE_CRASH_SEED    seed of the first run (default: random); run i uses seed + i
#   PODSTORE_CRASH_ROUNDS  rounds (kills) per test and run (default: the tests' own, 5)
#   CARGO_TEST_FLAGS       extra cargo flags, e.g. --release
#   CRASH_LOOP_KEEP_LOGS   directory to keep every run's output in (default: only a failed run's)
set -euo pipefail

runs=${1:-20}
filter=${2:-kill9_}
if ! [[ $runs =~ ^[0-9]+$ ]]; then
    echo "usage: $0 [RUNS] [TEST_FILTER]" >&2
    exit 2
fi
base_seed=${PODSTORE_CRASH_SEED:-$(((RANDOM << 30 | RANDOM << 15 | RANDOM) + 1))}
read -r -a cargo_flags <<<"${CARGO_TEST_FLAGS:-}"
cd "$(dirname "$0")/.."

cargo test "${cargo_flags[@]}" --test crash --no-run --quiet

log=$(mktemp -t crash-loop.XXXXXX)
trap 'rm -f "$log"' EXIT
# Totals over all runs, by field of the crash-summary lines.
declare -A total=()
fields=()
tests=0
started=$SECONDS

for ((i = 0; i < runs; i++)); do
    seed=$((base_seed + i))
    run_started=$SECONDS
    if ! PODSTORE_CRASH_SEED=$seed cargo test "${cargo_flags[@]}" --quiet --test crash \
        -- "$filter" --nocapture >"$log" 2>&1; then
        kept=$(mktemp -t "crash-loop-seed-$seed.XXXXXX.log")
        cp "$log" "$kept"
        grep -v '^@@' "$log" | tail -n 60 >&2
        echo >&2
        echo "crash-loop: run $((i + 1))/$runs FAILED (seed $seed); full output: $kept" >&2
        echo "reproduce: PODSTORE_CRASH_SEED=$seed${PODSTORE_CRASH_ROUNDS:+ PODSTORE_CRASH_ROUNDS=$PODSTORE_CRASH_ROUNDS}" \
            "cargo test${CARGO_TEST_FLAGS:+ $CARGO_TEST_FLAGS} --test crash -- $filter --nocapture" >&2
        exit 1
    fi
    if [[ -n ${CRASH_LOOP_KEEP_LOGS:-} ]]; then
        mkdir -p "$CRASH_LOOP_KEEP_LOGS"
        cp "$log" "$CRASH_LOOP_KEEP_LOGS/seed-$seed.log"
    fi
    summaries=$(grep -o 'crash-summary: .*' "$log" || true)
    if [[ -z $summaries ]]; then
        echo "crash-loop: run $((i + 1)) (seed $seed) ran no kill -9 test (filter '$filter'?)" >&2
        exit 1
    fi
    run_acks=0
    run_tests=0
    while read -r line; do
        run_tests=$((run_tests + 1))
        for kv in ${line#crash-summary: }; do
            key=${kv%%=*}
            value=${kv#*=}
            case $key in
            test | seed | secs | live_keys) continue ;;
            esac
            [[ $value =~ ^[0-9]+$ ]] || continue
            if [[ -z ${total[$key]+set} ]]; then
                total[$key]=0
                fields+=("$key")
            fi
            total[$key]=$((total[$key] + value))
            [[ $key == acks ]] && run_acks=$((run_acks + value))
        done
    done <<<"$summaries"
    tests=$((tests + run_tests))
    echo "crash-loop: run $((i + 1))/$runs ok: seed $seed, $run_tests tests, $run_acks acks verified, $((SECONDS - run_started)) s"
done

echo
echo "crash-loop: $runs runs passed (seeds $base_seed..$((base_seed + runs - 1)), filter '$filter'," \
    "$tests test runs, $((SECONDS - started)) s)"
for key in "${fields[@]}"; do
    printf '  %-20s %s\n' "$key" "${total[$key]}"
done
