#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Proves that the firmware is freestanding.

Compiles every firmware source with the freestanding flags, links them into
one relocatable object (ld -r) and fails if
  * anything is undefined except memcpy/memset/memmove/memcmp (which the
    compiler may emit for struct copies and which every C runtime provides), or
  * the object has writable global data (.data/.bss): several CCLOs run in one
    process, so all mutable state must live in ControlProgramState.
"""
import argparse
import os
import shlex
import subprocess
import sys
import tempfile

FLAGS = ['-std=c++20', '-ffreestanding', '-fno-exceptions', '-fno-rtti', '-nostdinc++',
         '-fno-threadsafe-statics', '-O2', '-Wall', '-Wextra', '-Werror']
ALLOWED_UNDEFINED = {'memcpy', 'memset', 'memmove', 'memcmp'}
# Created by the linker itself for position-independent code (PIE is the
# compiler default on Debian); not a runtime dependency.
LINKER_SYMBOLS = {'_GLOBAL_OFFSET_TABLE_'}


def run(cmd):
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        sys.stderr.write(f"command failed: {shlex.join(cmd)}\n{result.stdout}{result.stderr}")
        sys.exit(1)
    return result.stdout


def writable_sections(objdump, obj):
    bad = []
    for line in run([objdump, '-h', obj]).splitlines():
        parts = line.split()
        if len(parts) < 3 or not parts[0].isdigit():
            continue
        name, size = parts[1], int(parts[2], 16)
        writable = name.startswith('.data') or name.startswith('.bss')
        if writable and not name.startswith('.data.rel.ro') and size > 0:
            bad.append(f"{name} ({size} bytes)")
    return bad


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--cxx', required=True, help='compiler command (may contain spaces)')
    parser.add_argument('--ld', default='ld')
    parser.add_argument('--nm', default='nm')
    parser.add_argument('--objdump', default='objdump')
    parser.add_argument('-I', dest='includes', action='append', default=[])
    parser.add_argument('sources', nargs='+')
    args = parser.parse_args()

    cxx = shlex.split(args.cxx)
    with tempfile.TemporaryDirectory() as tmp:
        objects = []
        for i, src in enumerate(args.sources):
            obj = os.path.join(tmp, f"{i}_{os.path.basename(src)}.o")
            run(cxx + FLAGS + [f"-I{d}" for d in args.includes] + ['-c', src, '-o', obj])
            objects.append(obj)
        combined = os.path.join(tmp, 'firmware.o')
        run([args.ld, '-r', '-o', combined] + objects)
        undefined = set()
        for line in run([args.nm, '-u', combined]).splitlines():
            parts = line.split()
            if parts:
                undefined.add(parts[-1])
        undefined -= LINKER_SYMBOLS
        unexpected = sorted(undefined - ALLOWED_UNDEFINED)
        writable = writable_sections(args.objdump, combined)
    ok = True
    if unexpected:
        print("undefined symbols beyond mem*: " + ", ".join(unexpected))
        ok = False
    if writable:
        print("writable global data (mutable globals are not allowed): " + ", ".join(writable))
        ok = False
    if ok:
        print(f"freestanding: {len(args.sources)} sources, undefined: {sorted(undefined) or 'none'}")
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
