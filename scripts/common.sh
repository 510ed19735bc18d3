# Shared settings for scripts/*: where caches and builds live (outside the repo).
# shellcheck shell=bash
export PATH="$HOME/.cargo/bin:$PATH"
RADIX_REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RADIX_CACHE="${RADIX_CACHE:-$HOME/.cache/radixserve}"
RADIX_VENV="$RADIX_CACHE/venv"
# The PyTorch references (scripts/requirements-torch.txt), apart from the main venv.
RADIX_TORCH_VENV="$RADIX_CACHE/venv-torch"
RADIX_MODELS="$RADIX_CACHE/models"
RADIX_NPM="$RADIX_CACHE/npm"
# One build directory per checkout, so several clones never share a CMake cache.
_radix_tag="$(basename "$RADIX_REPO")-$(printf '%s' "$RADIX_REPO" | sha1sum | cut -c1-8)"
RADIX_BUILD_DIR="${RADIX_BUILD_DIR:-$RADIX_CACHE/build/$_radix_tag-release}"
RADIX_ASAN_BUILD_DIR="${RADIX_ASAN_BUILD_DIR:-$RADIX_CACHE/build/$_radix_tag-asan}"
RADIX_DEFAULT_MODEL="$RADIX_MODELS/smollm2-135m-instruct-q4_1.gguf"
export RADIX_REPO RADIX_CACHE RADIX_BUILD_DIR RADIX_ASAN_BUILD_DIR RADIX_MODELS RADIX_TORCH_VENV
export RADIX_CARGO_TARGET_DIR="${RADIX_CARGO_TARGET_DIR:-$RADIX_CACHE/cargo-target}"
export CCACHE_DIR="${CCACHE_DIR:-$RADIX_CACHE/ccache}"
export CCACHE_BASEDIR="$RADIX_REPO"
# Debug builds (-g) would otherwise hash the build directory: a fresh clone's sanitizer build
# then misses every cached object.
export CCACHE_NOHASHDIR=1
export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-5G}"

radix_log() { printf '[radixserve] %s\n' "$*" >&2; }

# Configures (once) and builds a CMake tree. Usage: radix_cmake_build DIR [cmake -D args...] -- targets
radix_cmake_build() {
  local dir="$1"; shift
  local defs=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do defs+=("$1"); shift; done
  [ "${1:-}" = "--" ] && shift
  if [ ! -f "$dir/build.ninja" ]; then
    cmake -S "$RADIX_REPO" -B "$dir" -G Ninja "${defs[@]}" >&2
  fi
  local jobs; jobs="$(nproc)"
  if [ $# -gt 0 ]; then
    cmake --build "$dir" -j "$jobs" --target "$@" >&2
  else
    cmake --build "$dir" -j "$jobs" >&2
  fi
}

# The sanitizer build (clang, ASan + UBSan, the libFuzzer targets) in $RADIX_ASAN_BUILD_DIR.
# CMakeLists.txt picks clang when it is installed; a directory configured earlier with another
# compiler is started afresh. Usage: radix_sanitizer_build [targets...]
radix_sanitizer_build() {
  if [ -f "$RADIX_ASAN_BUILD_DIR/CMakeCache.txt" ] && command -v clang++ >/dev/null &&
     ! grep -q '^CMAKE_CXX_COMPILER:.*clang' "$RADIX_ASAN_BUILD_DIR/CMakeCache.txt"; then
    rm -rf "$RADIX_ASAN_BUILD_DIR"
  fi
  radix_cmake_build "$RADIX_ASAN_BUILD_DIR" -DCMAKE_BUILD_TYPE=Debug -DRADIX_SANITIZE=ON -- "$@"
}

# The llama.cpp tree vendored in the llama-cpp-python sdist of scripts/requirements-test.txt
# (the version the oracle bindings are built from), downloaded and extracted once under
# $RADIX_CACHE/peer. Prints the tree's path. Used for the peer build (bench/build_peer.sh) and
# llama.cpp's Python converters (convert_lora_to_gguf.py).
radix_llama_cpp_source() {
  local version peer sdist src
  version="${PEER_VERSION:-$(grep -oP '^# llama-cpp-python==\K\S+' "$RADIX_REPO/scripts/requirements-test.txt")}"
  peer="${PEER_DIR:-$RADIX_CACHE/peer}"
  sdist="$peer/llama_cpp_python-$version.tar.gz"
  src="$peer/llama_cpp_python-$version/vendor/llama.cpp"
  mkdir -p "$peer"
  if [ ! -f "$sdist" ]; then
    radix_log "downloading the llama-cpp-python $version sdist from PyPI"
    "$RADIX_VENV/bin/pip" download -q --no-binary :all: --no-deps \
      "llama-cpp-python==$version" -d "$peer" >&2
  fi
  if [ ! -f "$src/CMakeLists.txt" ] || [ ! -f "$src/convert_lora_to_gguf.py" ]; then
    radix_log "extracting vendor/llama.cpp"
    tar xzf "$sdist" -C "$peer" "llama_cpp_python-$version/vendor/llama.cpp"
  fi
  echo "$src"
}
