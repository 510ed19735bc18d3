#!/usr/bin/env bash
# Makes the BF16 SmolLM2-135M GGUF for the BF16 comparisons: llama-quantize (from the peer build,
# bench/build_peer.sh) converts the F32 GGUF with type BF16 (matrices and embeddings to BF16; norms
# stay F32, as llama.cpp's converter does). Idempotent; prints the output path.
#   bench/make_bf16_gguf.sh
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/common.sh"

SRC="$RADIX_MODELS/smollm2-135m-instruct-f32.gguf"
OUT="$RADIX_MODELS/smollm2-135m-instruct-bf16.gguf"
if [ -s "$OUT" ]; then
  echo "$OUT"
  exit 0
fi
[ -f "$SRC" ] || { radix_log "missing $SRC (run scripts/setup)"; exit 1; }
# PEER_QUANTIZE: an existing llama-quantize, to skip the (idempotent) peer build check.
QUANTIZE="${PEER_QUANTIZE:-$("$RADIX_REPO/bench/build_peer.sh")/llama-quantize}"
radix_log "quantizing $SRC to BF16"
"$QUANTIZE" "$SRC" "$OUT.tmp" BF16 >&2
mv "$OUT.tmp" "$OUT"
echo "$OUT"
