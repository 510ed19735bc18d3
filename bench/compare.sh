#!/usr/bin/env bash
# radixserve vs llama.cpp on this machine, Q4_1 and BF16 SmolLM2-135M, 2 threads (bench/compare.py
# describes the runs). Builds or locates both sides, then prints the ratio table and writes JSON
# under $RADIX_CACHE/bench-results/<UTC time>[-quick]/.
#   bench/compare.sh            full comparison (tens of minutes)
#   bench/compare.sh --quick    small sizes, Q4_1 only: a smoke test of the whole pipeline
#   bench/compare.sh [--quick] --resume DIR   finish an interrupted run, reusing DIR's results
#   bench/compare.sh --no-peer-server         peer single stream from llama-bench only
# radixserve comes from $RADIX_BUILD_DIR (scripts/common.sh), built there if missing; the peer from
# bench/build_peer.sh. Run it on an otherwise idle machine: one server runs at a time.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/common.sh"

QUICK=()
RESUME=""
EXTRA=()
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=(--quick) ;;
    --resume) RESUME="$2"; shift ;;
    --no-peer-server) EXTRA+=(--no-peer-server) ;;
    *) echo "usage: $0 [--quick] [--resume DIR] [--no-peer-server]" >&2; exit 2 ;;
  esac
  shift
done

RADIX_BIN="$RADIX_BUILD_DIR/radixserve"
if [ ! -x "$RADIX_BIN" ]; then
  radix_log "building radixserve in $RADIX_BUILD_DIR"
  radix_cmake_build "$RADIX_BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -- radixserve
fi
PEER_BIN="$("$RADIX_REPO/bench/build_peer.sh")"

MODELS=(--model "q4_1=$RADIX_MODELS/smollm2-135m-instruct-q4_1.gguf")
if [ ${#QUICK[@]} -eq 0 ]; then
  MODELS+=(--model "bf16=$("$RADIX_REPO/bench/make_bf16_gguf.sh")")
fi

OUT="${RESUME:-$RADIX_CACHE/bench-results/$(date -u +%Y%m%dT%H%M%SZ)${QUICK:+-quick}}"
mkdir -p "$OUT"
{
  echo "radixserve: $RADIX_BIN ($(git -C "$RADIX_REPO" rev-parse --short HEAD))"
  echo "peer: $PEER_BIN"
  lscpu | grep -E '^(Model name|CPU\(s\)|L2 cache|L3 cache)'
} | tee "$OUT/setup.txt"
"$RADIX_VENV/bin/python" "$RADIX_REPO/bench/compare.py" --peer-bin "$PEER_BIN" \
  --radixserve "$RADIX_BIN" "${MODELS[@]}" --out-dir "$OUT" "${QUICK[@]}" \
  ${RESUME:+--resume} "${EXTRA[@]}"
