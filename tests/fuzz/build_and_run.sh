#!/bin/sh
# Builds the model-reader fuzz targets with clang + libFuzzer + ASan/UBSan (outside CMake, so the
# main build stays on GCC) and runs each for SECONDS seconds (default 120).
# usage: tests/fuzz/build_and_run.sh [SECONDS] [OUT_DIR]
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SECONDS_PER_TARGET=${1:-120}
OUT=${2:-/root/.cache/radixserve/fuzz}
mkdir -p "$OUT"
CXX=${CXX:-clang++}
FLAGS="-std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I$ROOT/src"
SRCS="$ROOT/src/model/mapped_file.cpp $ROOT/src/model/gguf_file.cpp $ROOT/src/model/safetensors_file.cpp \
      $ROOT/src/kernels/weight_format.cpp $ROOT/src/common/check.cpp"
for target in gguf_file_fuzz safetensors_file_fuzz; do
  $CXX $FLAGS "$ROOT/tests/fuzz/$target.cpp" $SRCS -o "$OUT/$target"
  mkdir -p "$OUT/corpus_$target"
done
# Seed corpora with the real files.
cp -n "$ROOT/../shared/models/stories260K/gguf/stories260K.gguf" "$OUT/corpus_gguf_file_fuzz/" 2>/dev/null || true
cp -n "$ROOT/../shared/models/stories260K/hf/model.safetensors" "$OUT/corpus_safetensors_file_fuzz/" 2>/dev/null || true
for target in gguf_file_fuzz safetensors_file_fuzz; do
  "$OUT/$target" -max_total_time="$SECONDS_PER_TARGET" -max_len=65536 -rss_limit_mb=2048 \
    "$OUT/corpus_$target"
done
