#!/usr/bin/env bash
# Runs integration tests again and again on a loaded machine and names every test that failed
# even once: the check for timing-dependent tests before a change is handed in.
#
#   scripts/soak-tests.sh                 # channels:: and daemon::, 5 rounds
#   scripts/soak-tests.sh memory:: chain::  # other filters of the `it` test binary
#   SOAK_ROUNDS=10 scripts/soak-tests.sh
#
# Each round runs two processes of the `it` test binary at once, each with its usual test
# threads, so every test runs while the other process keeps the cores busy. Logs stay in
# $SOAK_DIR (default: a new directory under the system's temp dir). Exits 1 when a test failed
# or a run did not finish (SOAK_RUN_TIMEOUT seconds per run, default 1800).
set -euo pipefail
cd "$(dirname "$0")/.."

rounds="${SOAK_ROUNDS:-5}"
run_timeout="${SOAK_RUN_TIMEOUT:-1800}"
filters=("$@")
if [ "${#filters[@]}" -eq 0 ]; then
  filters=(channels:: daemon::)
fi
export NO_PROXY="127.0.0.1,localhost${NO_PROXY:+,$NO_PROXY}"
export no_proxy="$NO_PROXY"
export CARGO_TERM_COLOR=never

echo "== building the integration tests"
binary=$(cargo test --test it --no-run 2>&1 | tee /dev/stderr \
  | sed -n 's/^ *Executable tests\/it\/main\.rs (\(.*\))$/\1/p' | tail -n 1)
if [ -z "$binary" ] || [ ! -x "$binary" ]; then
  echo "could not find the built test binary" >&2
  exit 2
fi

logs="${SOAK_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/antler-soak.XXXXXX")}"
mkdir -p "$logs"
echo "== $rounds rounds of two concurrent runs of: ${filters[*]} (logs in $logs)"

started=$SECONDS
unfinished=()
for round in $(seq 1 "$rounds"); do
  round_started=$SECONDS
  pids=()
  for process in a b; do
    timeout --kill-after=30 "$run_timeout" "$binary" "${filters[@]}" \
      >"$logs/round-$round-$process.log" 2>&1 &
    pids+=($!)
  done
  for index in 0 1; do
    wait "${pids[$index]}" || true
  done
  summary=""
  for process in a b; do
    log="$logs/round-$round-$process.log"
    result=$(grep -E '^test result: ' "$log" | tail -n 1 || true)
    if [ -z "$result" ]; then
      unfinished+=("round $round, run $process ($log)")
      result="did not finish"
    fi
    summary+="  $process: ${result#test result: }"$'\n'
  done
  echo "round $round ($((SECONDS - round_started)) s):"
  printf '%s' "$summary"
done

echo "== $((rounds * 2)) runs in $((SECONDS - started)) s"
failed=$(cat "$logs"/round-*.log | sed -n 's/^test \(.*\) \.\.\. FAILED$/\1/p' \
  | sort | uniq -c | sort -rn || true)
status=0
if [ -n "$failed" ]; then
  echo "tests that failed at least once (failures out of $((rounds * 2)) runs):"
  echo "$failed"
  echo "(each failure's output: grep -n -A40 -- '---- NAME stdout ----' $logs/round-*.log)"
  status=1
else
  echo "no test failed"
fi
if [ "${#unfinished[@]}" -gt 0 ]; then
  echo "runs that did not finish (timed out or crashed):"
  printf '  %s\n' "${unfinished[@]}"
  status=1
fi
exit "$status"
