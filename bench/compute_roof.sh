#!/usr/bin/env bash
# Builds bench/compute_roof.c into $RADIX_CACHE/bench-bin (as bench/bandwidth_probe.sh builds its
# probe) and runs it: G instructions and G multiply-adds per second of vpdpbusd, vdpbf16ps,
# vfmadd231ps at 512 and 256 bits and of the AVX2 int8 step (vpbroadcastd + vpmaddubsw + vpaddw),
# on 1 and 2 threads (the prefill and batched-decode roofline).
#   bench/compute_roof.sh [max_threads=2]
exec "$(dirname "${BASH_SOURCE[0]}")/bandwidth_probe.sh" --program compute_roof "$@"
