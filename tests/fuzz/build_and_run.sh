#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/CMakeLists.txt) in the sanitizer build directory
# ($RADIX_ASAN_BUILD_DIR: clang, ASan + UBSan, RADIX_FUZZ) and runs each for a bounded time.
#   tests/fuzz/build_and_run.sh [SECONDS_PER_TARGET] [TARGET...]
# SECONDS_PER_TARGET defaults to $RADIX_FUZZ_SECONDS, else 60; TARGETs default to all four.
#
# Each target fuzzes a working corpus in $RADIX_CACHE/fuzz/corpus/<target> (seeded with a copy of
# tests/fuzz/corpus/<target>; libFuzzer adds what it finds there, never in the repository), plus
# the repository corpus read-only. A crash, sanitizer report, hang (-timeout) or out-of-memory
# (-rss_limit_mb) fails the script; the input is saved to $RADIX_CACHE/fuzz/artifacts/<target>/.
# Replay one with: $RADIX_ASAN_BUILD_DIR/<target> <input file>
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/common.sh"

SECONDS_PER_TARGET="${1:-${RADIX_FUZZ_SECONDS:-60}}"
shift || true
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(http_request_fuzz api_request_fuzz gguf_file_fuzz safetensors_file_fuzz)
FUZZ_DIR="$RADIX_CACHE/fuzz"
SRC="$RADIX_REPO/tests/fuzz"
SHARED="${RADIX_SHARED_DIR:-$RADIX_REPO/../shared}"

command -v clang++ >/dev/null || { radix_log "fuzzing needs clang (scripts/setup installs it)"; exit 1; }
radix_sanitizer_build "${TARGETS[@]}"

# Runs one target; its output goes to $FUZZ_DIR/<target>.log.
fuzz_one() {
  local target="$1"
  local corpus="$FUZZ_DIR/corpus/$target"
  local artifacts="$FUZZ_DIR/artifacts/$target"
  mkdir -p "$corpus" "$artifacts"
  cp -rn "$SRC/corpus/$target/." "$corpus/"
  local args=(-max_total_time="$SECONDS_PER_TARGET" -rss_limit_mb=2048 -timeout=10
              -print_final_stats=1 -artifact_prefix="$artifacts/")
  [ -f "$SRC/$target.dict" ] && args+=(-dict="$SRC/$target.dict")
  local dirs=("$corpus" "$SRC/corpus/$target")
  case "$target" in
    # The real checkpoints seed the model readers (read-only, cut to 64 KiB by -max_len).
    gguf_file_fuzz)
      args+=(-max_len=65536)
      [ -d "$SHARED/models/stories260K/gguf" ] && dirs+=("$SHARED/models/stories260K/gguf") ;;
    safetensors_file_fuzz)
      args+=(-max_len=65536)
      [ -d "$SHARED/models/stories260K/hf" ] && dirs+=("$SHARED/models/stories260K/hf") ;;
    *) args+=(-max_len=16384) ;;
  esac
  # detect_leaks stays on: a leak is a finding like any other.
  ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}" UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}" \
    RADIX_SHARED_DIR="$SHARED" "$RADIX_ASAN_BUILD_DIR/$target" "${args[@]}" "${dirs[@]}" \
    2>"$FUZZ_DIR/$target.log"
}

# Each target is one process on one core: they run side by side, as many at once as there are
# cores, each for its full time.
declare -A pid_target=()
failed=()
reap_one() {
  local pid
  # wait -n -p (bash 5.1) names the job that ended.
  if wait -n -p pid; then :; else failed+=("${pid_target[$pid]}"); fi
  local target="${pid_target[$pid]}"
  unset "pid_target[$pid]"
  printf '%s: ' "$target" >&2
  grep -E '^#[0-9]+[[:space:]]+DONE|stat::number_of_executed_units|stat::average_exec_per_sec' \
    "$FUZZ_DIR/$target.log" | tr '\n' ' ' >&2 || true
  echo >&2
}
for target in "${TARGETS[@]}"; do
  while [ ${#pid_target[@]} -ge "$(nproc)" ]; do reap_one; done
  radix_log "fuzzing $target for ${SECONDS_PER_TARGET}s"
  fuzz_one "$target" &
  pid_target[$!]="$target"
done
while [ ${#pid_target[@]} -gt 0 ]; do reap_one; done
for target in "${failed[@]}"; do
  tail -n 80 "$FUZZ_DIR/$target.log" >&2
  radix_log "$target FAILED; the input is in $FUZZ_DIR/artifacts/$target/ (full log: $FUZZ_DIR/$target.log)"
done
[ ${#failed[@]} -eq 0 ] || exit 1
radix_log "fuzzing passed: ${TARGETS[*]}"
