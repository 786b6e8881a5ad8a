#!/usr/bin/env bash
# Runs the simulated power-loss model test (src/tests/powerloss.rs) again and again for a given
# time, each run with PROPTEST_CASES new random cases, then the I/O fault test
# (src/tests/faults.rs) once; stops at the first failure (exit 1) and keeps its output. At the
# end prints the totals of the tests' `powerloss-summary` lines and the `faults-summary` line.
#
# usage: scripts/powerloss-loop.sh [SECONDS]
#   SECONDS            how long to keep starting runs (default 300)
# environment:
#   PROPTEST_CASES     cases per run (default 1000)
#   CARGO_TEST_FLAGS   extra cargo flags, e.g. --release
set -euo pipefail

secs=${1:-300}
if ! [[ $secs =~ ^[0-9]+$ ]]; then
    echo "usage: $0 [SECONDS]" >&2
    exit 2
fi
cases=${PROPTEST_CASES:-1000}
read -r -a cargo_flags <<<"${CARGO_TEST_FLAGS:-}"
cd "$(dirname "$0")/.."

cargo test "${cargo_flags[@]}" --lib --no-run --quiet

log=$(mktemp -t powerloss-loop.XXXXXX)
trap 'rm -f "$log"' EXIT
declare -A total=()
fields=()
runs=0
started=$SECONDS

fail() {
    kept=$(mktemp -t "powerloss-loop-failed.XXXXXX.log")
    cp "$log" "$kept"
    grep -v '^@@' "$log" | tail -n 80 >&2
    echo >&2
    echo "powerloss-loop: $1 FAILED; full output: $kept" >&2
    exit 1
}

while ((SECONDS - started < secs)); do
    runs=$((runs + 1))
    if ! PROPTEST_CASES=$cases cargo test "${cargo_flags[@]}" --quiet --lib \
        tests::powerloss::power_loss_at_random -- --nocapture >"$log" 2>&1; then
        fail "run $runs"
    fi
    line=$(grep -o 'powerloss-summary: .*' "$log" || true)
    [[ -n $line ]] || fail "run $runs (no summary line)"
    for kv in ${line#powerloss-summary: }; do
        key=${kv%%=*}
        value=${kv#*=}
        [[ $value =~ ^[0-9]+$ ]] || continue
        if [[ -z ${total[$key]+set} ]]; then
            total[$key]=0
            fields+=("$key")
        fi
        total[$key]=$((total[$key] + value))
    done
    echo "powerloss-loop: run $runs ok ($cases cases, $((SECONDS - started)) s)"
done

if ! cargo test "${cargo_flags[@]}" --quiet --lib tests::faults -- --nocapture >"$log" 2>&1; then
    fail "fault test"
fi

echo
echo "powerloss-loop: $runs runs of $cases cases passed in $((SECONDS - started)) s"
for key in "${fields[@]}"; do
    printf '  %-22s %s\n' "$key" "${total[$key]}"
done
grep -o 'faults-summary: .*' "$log" || true
