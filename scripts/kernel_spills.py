#!/usr/bin/env python3
"""Finds kernel loops that keep vector registers in stack slots: for each innermost loop (a
backward jump containing no other) with at least MIN_MACS multiply-add instructions (vfmadd*,
vpdp*, vdpbf16ps, vpmaddubsw, vpmaddwd), counts the ymm/zmm stores to the stack inside it.
A tile whose accumulators GCC could not keep in registers shows one store per few multiply-adds
and runs at a fraction of its speed (session 46: the AVX2 F32 panel tile, 2-3x), whatever the
CPU, so this reads the compiled objects rather than timing them.

    python3 scripts/kernel_spills.py [--min-macs N] OBJECT_OR_ARCHIVE...
    python3 scripts/kernel_spills.py $RADIX_BUILD_DIR/src/kernels/libradix_kernels.a

Prints one line per such loop (stores, stack references, instructions, multiply-adds, function)
and exits 0; objdump (binutils) must be on PATH.
"""
import argparse
import re
import subprocess
import sys

MAC = re.compile(r"\s(vfmadd|vfnmadd|vpdp|vdpbf16ps|vpmaddubsw|vpmaddwd)")
STACK_STORE = re.compile(r"\svmov\w*\s+%[yz]mm\d+,.*\(%rsp\)")
ADDRESS = re.compile(r"\s*([0-9a-f]+):")
BACK_JUMP = re.compile(r"\sj\w+\s+([0-9a-f]+) <")


def innermost_loops(lines):
    """(first, last) addresses of the loops in one function's disassembly that hold no other."""
    loops = set()
    for line in lines:
        jump, at = BACK_JUMP.search(line), ADDRESS.match(line)
        if jump and at and int(jump.group(1), 16) < int(at.group(1), 16):
            loops.add((int(jump.group(1), 16), int(at.group(1), 16)))
    return [(a, b) for a, b in loops
            if not any(c >= a and d <= b and (c, d) != (a, b) for c, d in loops)]


def report(path, min_macs):
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "-C", path],
                         capture_output=True, text=True, check=True).stdout
    found = []
    for function in re.split(r"\n(?=[0-9a-f]+ <)", out):
        lines = function.splitlines()
        if not lines or "<" not in lines[0]:
            continue
        name = lines[0][lines[0].index("<") + 1:].rstrip(">:")
        addressed = [(int(m.group(1), 16), line) for line in lines
                     if (m := ADDRESS.match(line))]
        for first, last in innermost_loops(lines):
            body = [line for at, line in addressed if first <= at <= last]
            macs = sum(bool(MAC.search(line)) for line in body)
            stores = sum(bool(STACK_STORE.search(line)) for line in body)
            if macs >= min_macs and stores:
                refs = sum("(%rsp)" in line for line in body)
                found.append((stores, refs, len(body), macs, name))
    return found


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("objects", nargs="+")
    p.add_argument("--min-macs", type=int, default=4)
    args = p.parse_args()
    rows = []
    for path in args.objects:
        rows += report(path, args.min_macs)
    print("stores  refs  insns  macs  function")
    for stores, refs, insns, macs, name in sorted(rows, reverse=True):
        print(f"{stores:6d} {refs:5d} {insns:6d} {macs:5d}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
