#!/usr/bin/env bash
# Builds bench/bandwidth_probe.c with the system compiler into $RADIX_CACHE/bench-bin and runs it.
#   bench/bandwidth_probe.sh [max_threads=2] [max_mb=1024]
#   bench/bandwidth_probe.sh --program compute_roof [args]   (bench/compute_roof.sh)
# Prints a table of read GB/s per working-set size and thread count (the decode roofline).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/common.sh"

OUT="$RADIX_CACHE/bench-bin"
mkdir -p "$OUT"
PROGRAM=bandwidth_probe
if [ "${1:-}" = "--program" ]; then
  PROGRAM="$2"
  shift 2
fi
SRC="$RADIX_REPO/bench/$PROGRAM.c"
# Built for this machine (AVX-512 loads where the CPU has them, AVX2 otherwise), keyed by the CPU
# model so a cache carried to another machine is rebuilt.
BIN="$OUT/$PROGRAM-$(grep -m1 'model name' /proc/cpuinfo | md5sum | cut -c1-8)"
if [ ! -x "$BIN" ] || [ "$SRC" -nt "$BIN" ]; then
  "${CC:-cc}" -O2 -march=native -pthread -Wall -Wextra -Werror "$SRC" -o "$BIN"
fi
exec "$BIN" "$@"
