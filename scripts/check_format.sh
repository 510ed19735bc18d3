#!/usr/bin/env bash
# Fails, listing the files, when a C++ source of the project differs from what clang-format makes
# of it (.clang-format at the repository root). The version is pinned to Debian 12's
# clang-format 14: other versions format some constructs differently. Fix with
#   scripts/check_format.sh --fix
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
version="$(clang-format --version | grep -oE '[0-9]+\.[0-9]+(\.[0-9]+)?' | head -n1)"
if [ "${version%%.*}" != "14" ]; then
  echo "check_format: clang-format 14 (Debian 12's) expected, found ${version:-none}" >&2
  exit 1
fi
mapfile -t files < <(find src tests tools bench/cpp \( -name '*.cpp' -o -name '*.h' \) \
  -not -path '*/generated/*' | sort)
if [ "${1:-}" = "--fix" ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  echo "check_format: ${#bad[@]} file(s) differ from clang-format's output (run" \
       "scripts/check_format.sh --fix):" >&2
  printf '  %s\n' "${bad[@]}" >&2
  exit 1
fi
echo "check_format: ${#files[@]} files formatted"
