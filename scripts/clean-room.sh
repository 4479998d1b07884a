#!/usr/bin/env bash
# The clean-room check: CI as a new machine runs it. Clones the committed HEAD into a
# temporary folder and runs .ci/run there with every cache empty: its own
# XDG_CACHE_HOME (so the llama-cpp-python wheel, the model and LiteLLM's venv are built
# and fetched anew), PIP_NO_CACHE_DIR=1 and a fresh npm cache. A warm cache hides
# missing set-up steps, and a wheel built natively on another CPU can crash on this one.
#
#   bash scripts/clean-room.sh            # or: make clean-room
#   KEEP=1 bash scripts/clean-room.sh     # keep the folder even when the run passes
#
# Prints the wall time and the result; the folder (with ci.log) is kept when it fails.
set -uo pipefail

src=$(git -C "$(dirname "$0")" rev-parse --show-toplevel) || exit 2
work=$(mktemp -d "${TMPDIR:-/tmp}/agcore-clean-room.XXXXXX")
git clone --quiet --no-local "$src" "$work/repo" || exit 2
echo "clean-room: $(git -C "$work/repo" rev-parse --short HEAD) in $work (log: $work/ci.log)"

start=$(date +%s)
(
  cd "$work/repo" &&
    env XDG_CACHE_HOME="$work/cache" PIP_NO_CACHE_DIR=1 npm_config_cache="$work/npm-cache" \
      CI=true bash .ci/run
) >"$work/ci.log" 2>&1 </dev/null
rc=$?
took=$(($(date +%s) - start))

# Every test runner's closing line (make test, then make test-interop), each step's wall
# time, and the last lines.
grep -E '^=+ .*(passed|failed|error).* in [0-9.]+s' "$work/ci.log"
grep -E '^ci: ' "$work/ci.log"
tail -n 3 "$work/ci.log"
printf 'clean-room: exit %d after %dm%02ds\n' "$rc" $((took / 60)) $((took % 60))
if [ "$rc" -eq 0 ] && [ -z "${KEEP:-}" ]; then
  rm -rf "$work"
else
  echo "clean-room: kept $work"
fi
exit "$rc"
