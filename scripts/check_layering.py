#!/usr/bin/env python3
"""Fails when a source folder includes a folder to its right in DESIGN.md's dependency order.

common <- args <- {tokenizer, kernels, metrics} <- {chat, model, kv, sampling} <- sched <- spec
       <- dist <- engine <- api <- http <- web <- main
A folder may include itself and any folder of a lower level; folders of one level may not include
each other.
"""
import pathlib
import re
import sys

LEVELS = [["common"], ["args"], ["tokenizer", "kernels", "metrics"],
          ["chat", "model", "kv", "sampling"], ["sched"], ["spec"], ["dist"], ["engine", "disagg"], ["api"],
          ["http"], ["web"], ["main"]]
LEVEL = {folder: i for i, group in enumerate(LEVELS) for folder in group}
INCLUDE = re.compile(r'^\s*#\s*include\s*"([a-z_]+)/', re.M)


def violations(src: pathlib.Path):
    for path in sorted(src.rglob("*")):
        if path.suffix not in {".h", ".hpp", ".cpp", ".cc", ".inc"}:
            continue
        folder = path.relative_to(src).parts[0]
        if folder not in LEVEL:
            continue
        for target in INCLUDE.findall(path.read_text(errors="replace")):
            if target == folder or target not in LEVEL:
                continue
            if LEVEL[target] >= LEVEL[folder]:
                yield f"{path.relative_to(src)} includes {target}/ (to the right of {folder}/)"


def main() -> int:
    src = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "src")
    found = list(violations(src))
    for line in found:
        print(f"layering violation: {line}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
