#!/usr/bin/env bash
# Fails when link/symbol-order.txt has decayed: when it was made with another rustc than this one,
# or when fewer than 90 % of its names are functions of today's `dist` binary (code renamed or
# moved since it was made). Either way the fix is `link/symbol-order.sh`, which regenerates it.
# Without this check the order would silently stop applying and the idle daemon grow ~11 MiB.
# Usage: link/check-symbol-order.sh [minimum percent, default 90]  (builds `--profile dist`)
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/.."
minimum="${1:-90}"
list=link/symbol-order.txt
made_with="$(head -n 1 "$list" | sed 's/^# //')"
if [ "$made_with" != "$(rustc -V)" ]; then
  echo "$list was made with $made_with, this is $(rustc -V): run link/symbol-order.sh"
  exit 1
fi
cargo build --profile dist --locked --bin antler
target="$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
nm --defined-only "$target/dist/antler" | awk '{ print $3 }' | sort -u >"$work/defined"
grep -v '^#' "$list" | sort -u >"$work/wanted"
wanted=$(wc -l <"$work/wanted")
found=$(comm -12 "$work/wanted" "$work/defined" | wc -l)
percent=$((found * 100 / wanted))
echo "$list: $found of $wanted names resolve in the dist binary ($percent %, minimum $minimum %)"
if [ "$percent" -lt "$minimum" ]; then
  echo "the symbol order has decayed: run link/symbol-order.sh (needs valgrind) and commit the list"
  exit 1
fi
