# SPDX-License-Identifier: Apache-2.0
"""Reading what the programs print: OSU-format tables (kept best-of-N by the Recorder), the allocation
counter's lines, accl-bench-pingpong's rows and accl-bench-core's CSV files."""

import csv
import re
import shlex

from .common import first_error_line


def parse_osu(text):
    """OSU-format output -> (kind, {size: value}, rss_kib or None, validation_ok or None)."""
    kind = "lat"
    rows = {}
    rss = None
    valid = None
    for line in text.splitlines():
        s = line.strip()
        if not s:
            continue
        if s.startswith("#"):
            if "MB/s" in s:
                kind = "bw"
            m = re.search(r"Peak RSS per rank \(KiB\): avg (\d+)", s)
            if m:
                rss = int(m.group(1))
            if "Validation: FAILED" in s:
                valid = False
            elif "Validation: Passed" in s and valid is None:
                valid = True
            continue
        tok = s.split()
        if tok and tok[-1] in ("Pass", "Fail"):
            if tok[-1] == "Fail":
                valid = False
            tok = tok[:-1]
        try:
            nums = [float(t) for t in tok]
        except ValueError:
            continue
        if len(nums) == 1:  # barrier: one latency column
            rows[0] = nums[0]
        elif len(nums) >= 2 and nums[0] == int(nums[0]):
            rows[int(nums[0])] = nums[1]
    return kind, rows, rss, valid


class Recorder:
    """Best-of-N per (bench, np, mode, size) plus run bookkeeping."""

    def __init__(self):
        self.best = {}      # (bench, np, mode) -> {size: value}
        self.kind = {}      # bench -> lat/bw
        self.runs = {}      # (bench, np, mode) -> [ok, total]
        self.errors = {}    # (bench, np, mode) -> first error text
        self.rss = {}       # (bench, np, mode) -> [kib...]
        self.cmds = {}      # (bench, np, mode) -> command line

    def add(self, bench, np_, mode, rc, out, err, cmd):
        key = (bench, np_, mode)
        self.cmds.setdefault(key, " ".join(shlex.quote(c) for c in cmd))
        counts = self.runs.setdefault(key, [0, 0])
        counts[1] += 1
        kind, rows, rss, valid = parse_osu(out)
        self.kind.setdefault(bench, kind)
        if rc != 0 or not rows or valid is False:
            reason = "exit %d: %s" % (rc, first_error_line(err, out)) if rc != 0 else (
                "validation failed" if valid is False else "no result rows")
            self.errors.setdefault(key, reason)
            return False
        counts[0] += 1
        if rss is not None:
            self.rss.setdefault(key, []).append(rss)
        best = self.best.setdefault(key, {})
        for size, v in rows.items():
            if size not in best:
                best[size] = v
            elif kind == "bw":
                best[size] = max(best[size], v)
            else:
                best[size] = min(best[size], v)
        return True


def native_accl(table, bench, np_, default=None):
    """The native and the ACCL entry of one of the Recorder's tables."""
    return table.get((bench, np_, "native"), default), table.get((bench, np_, "accl"), default)


def parse_allocations(text):
    """test_alloc output -> (worst allocations of any rank, rounds) or None."""
    found = [(int(m.group(1)), int(m.group(2))) for m in
             re.finditer(r"rank \d+: (\d+) allocations in (\d+) rounds", text)]
    if not found:
        return None
    return max(a for a, _ in found), found[0][1]


def parse_rung_mean(text, size):
    """Mean one-way µs of `size` bytes from accl-bench-pingpong output."""
    for line in text.splitlines():
        cols = line.split()
        if len(cols) == 5 and cols[0] == str(size):
            try:
                return float(cols[4])
            except ValueError:
                return None
    return None


def read_csv(path):
    try:
        with open(path) as f:
            return list(csv.DictReader(f))
    except OSError:
        return []
