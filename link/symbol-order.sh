#!/usr/bin/env bash
# Regenerates link/symbol-order.txt: the functions the `dist` binary runs from start until it
# has idled a while (on the embedded defaults, then with the four channels connected to the
# platform fakes of tests/support), then those its HTTP turns run, each group in its current
# address order.
# build.rs hands the list to lld, which puts those functions first in .text, so the code an
# idle daemon touched is a few contiguous MB instead of pages scattered over all 28 MB of it
# (see ARCHITECTURE.md, "Memory and the allocator"). Run after large changes; names that no
# longer exist are skipped by the linker. Needs valgrind, curl and binutils (nm).
# Usage: ANTLER_MODEL_URL=http://…/v1 link/symbol-order.sh [idle seconds, default 20]
# (any OpenAI-compatible model for the turns; without one only start and idle are recorded).
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/.."
idle="${1:-20}"
listen=127.0.0.1:18787
cargo build --profile dist --locked --bin antler
cargo build --locked -p antler-test-support --example ops_bench
target="$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')"
bin="$target/dist/antler"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# The channels: ops_bench starts the daemon (here under callgrind) against the fakes and lets it
# settle; what ran is dumped to channels.out.1 before ops_bench stops it. Under callgrind the
# start-up takes a minute or two: the dump comes 150 s + idle after the start, the stop 200 s +
# idle after ready.
cat >"$work/under-callgrind" <<WRAPPER
#!/bin/sh
exec valgrind --tool=callgrind --demangle=no --callgrind-out-file=$work/channels.out $bin "\$@"
WRAPPER
chmod +x "$work/under-callgrind"
(sleep "$((idle + 150))" && callgrind_control -d "$bin" >/dev/null) &
ANTLER_BENCH_READY_S=600 "$target/debug/examples/ops_bench" idle --binary "$work/under-callgrind" --settle-s "$((idle + 200))" >/dev/null
wait
# The embedded defaults in an empty directory; nothing calls the model while it idles.
model_url="${ANTLER_MODEL_URL:-}"
(cd "$work" && ANTLER_MODEL_URL="${model_url:-http://127.0.0.1:9/v1}" ANTLER_LISTEN="$listen" \
  timeout -s TERM "$((idle + 300))" valgrind --tool=callgrind --demangle=no \
  --callgrind-out-file="$work/callgrind.out" "$bin" >"$work/daemon.log" 2>&1) &
runner=$!
for _ in $(seq 1 300); do
  grep -q "listening" "$work/daemon.log" 2>/dev/null && break
  sleep 1
done
grep -q "listening" "$work/daemon.log" || { cat "$work/daemon.log"; exit 1; }
sleep "$idle"
# Dumps what ran so far to callgrind.out.1; the turns go to callgrind.out at exit.
callgrind_control -d "$bin" >/dev/null
if [ -n "$model_url" ]; then
  body='{"input":{"messages":[{"role":"user","content":"Hello, what can you do?"}]}}'
  for n in $(seq 1 10); do
    for thread in "fresh-$n" long; do
      curl -sf -X POST -H 'Content-Type: application/json' -d "$body" \
        "http://$listen/api/threads/$thread/runs/wait" >/dev/null || echo "turn on $thread failed"
    done
  done
fi
pkill -TERM -f "callgrind-out-file=$work/callgrind.out" || true
wait "$runner" || true
# callgrind names each object (ob=) and function (fn=, cfn=) once and refers to it by number after.
ran() {
  awk -v bin="$bin" '
    function id(line) { return substr(line, index(line, "(") + 1, index(line, ")") - index(line, "(") - 1) }
    function named(line) { return index(line, ") ") ? substr(line, index(line, ") ") + 2) : "" }
    /^c?ob=\(/ {
      if (named($0) != "") ob[id($0)] = named($0)
      if ($0 ~ /^ob=/) cur = ob[id($0)]
      next
    }
    /^c?fn=\(/ {
      if (named($0) != "") fn[id($0)] = named($0)
      if ($0 ~ /^fn=/ && cur == bin) ran[fn[id($0)]] = 1
    }
    END { for (name in ran) print name }
  ' "$1" | sort -u
}
nm --defined-only "$bin" | awk '$2 ~ /^[tTwW]$/ { print $1, $3 }' | sort -u -k2,2 >"$work/symbols"
# A group in address order keeps the linker's default relative layout among its functions.
in_address_order() { join -1 2 -2 1 -o 1.1,1.2 "$work/symbols" - | sort | awk '{ print $2 }'; }
{ ran "$work/channels.out.1"; ran "$work/callgrind.out.1"; } | sort -u >"$work/idle"
ran "$work/callgrind.out" | comm -23 - "$work/idle" >"$work/turns"
# The first line names the rustc whose symbol hashes these are (build.rs compares it; lld skips
# lines starting with #).
{
  echo "# $(rustc -V)"
  in_address_order <"$work/idle"
  in_address_order <"$work/turns"
} >link/symbol-order.txt
echo "link/symbol-order.txt: $(wc -l <"$work/idle") functions start and idle run, $(wc -l <"$work/turns") more for turns"
