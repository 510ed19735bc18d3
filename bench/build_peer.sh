#!/usr/bin/env bash
# Builds the llama.cpp peer for benchmarks: llama-server, llama-bench, llama-batched-bench and
# llama-quantize from the llama.cpp tree vendored in the llama-cpp-python sdist on PyPI (the same
# version the oracle tests use, from scripts/requirements-test.txt). Nothing lands in the
# repository; everything lives under $RADIX_CACHE/peer. Idempotent: prints the bin directory and
# exits when the binaries exist.
#
#   bench/build_peer.sh            -> prints the directory holding the four binaries
#
# Flags: Release, GGML_NATIVE=ON (-march=native) with AVX512-FP16 and AMX switched off. This
# llama.cpp has no GGML_AVX512_FP16 option (native mode takes every ISA extension from
# -march=native), so the extensions are switched off with -mno-* in the C/C++ flags; GCC keeps an
# explicit -mno-* even when -march=native comes later on the command line. AMX is off because this
# VM lists AMX in its CPU flags but llama.cpp's AMX Q4_1 kernel dies with SIGILL on `tileloadd`
# here (llama-bench on the Q4_1 GGUF, build with AMX). AVX-512 F/BW/VL/VNNI/BF16 stay on.
# PEER_EXTRA_FLAGS appends flags. A change of flags reconfigures and rebuilds (stamp file).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/common.sh"

REQ="$RADIX_REPO/scripts/requirements-test.txt"
VERSION="${PEER_VERSION:-$(grep -oP '^# llama-cpp-python==\K\S+' "$REQ" || echo 0.3.36)}"
PEER_DIR="${PEER_DIR:-$RADIX_CACHE/peer}"
SRC="$PEER_DIR/llama_cpp_python-$VERSION/vendor/llama.cpp"
BUILD="$PEER_DIR/build-$VERSION"
BIN="$BUILD/bin"
TARGETS=(llama-server llama-bench llama-quantize llama-batched-bench)
FLAGS="-mno-avx512fp16 -mno-amx-tile -mno-amx-int8 -mno-amx-bf16 ${PEER_EXTRA_FLAGS:-}"
STAMP="$BUILD/radix-peer-flags"

built() {
  local t
  for t in "${TARGETS[@]}"; do [ -x "$BIN/$t" ] || return 1; done
  [ "$(cat "$STAMP" 2>/dev/null)" = "$FLAGS" ]
}

if built; then
  echo "$BIN"
  exit 0
fi

SRC="$(PEER_VERSION="$VERSION" PEER_DIR="$PEER_DIR" radix_llama_cpp_source)"

radix_log "building ${TARGETS[*]} (Release, native, $FLAGS) in $BUILD"
cmake -S "$SRC" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DGGML_NATIVE=ON -DCMAKE_C_FLAGS="$FLAGS" -DCMAKE_CXX_FLAGS="$FLAGS" \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_OPENSSL=OFF \
  -DBUILD_SHARED_LIBS=OFF >&2
# The benchmark tools first (they need less), then the server.
nice cmake --build "$BUILD" -j"${PEER_JOBS:-2}" --target llama-bench llama-quantize llama-batched-bench >&2
nice cmake --build "$BUILD" -j"${PEER_JOBS:-2}" --target llama-server >&2
echo "$FLAGS" > "$STAMP"
built || { radix_log "peer build finished without all of: ${TARGETS[*]}"; exit 1; }
echo "$BIN"
