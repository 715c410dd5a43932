#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""accl-tune's decisions from given measurements (--from-raw: no benchmark runs, no timing), of one host and of
two (a size offloads only where both gain), and the file it writes passes the layer's own check (accl-info
--check-settings with ACCL_TUNING_FILE).

check_accl_tune.py ACCL_TUNE ACCL_INFO
check_accl_tune.py --shipped ACCL_TUNE SHIPPED_JSON MEASURED_JSON REFERENCE_CSV
"""
import json
import os
import subprocess
import sys
import tempfile

SIZES = [4, 8, 16, 32, 64, 128]


def config(bench, np_, native, offload):
    return {"bench": bench, "np": np_, "runs": 2, "failed": "",
            "native": {str(s): v for s, v in zip(SIZES, native)},
            "offload": {str(s): v for s, v in zip(SIZES, offload)}}


def shipped_default(tune, shipped, measured, reference):
    """The shipped file's decisions are what accl-tune makes of the measurements it was written from (and of
    the report `reference` when the file says it was made to agree with one)."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "tuning.json")
        with open(shipped) as f:
            doc = json.load(f)
        # A table measured under load was checked against a report (--agree-with); the check does the same.
        agree = ["--agree-with", reference] if doc["measured"].get("agreed_with") else []
        r = subprocess.run([sys.executable, tune, "--from-raw", measured, "--margin", str(doc["measured"]["margin"]),
                            "--out", out] + agree, capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            print(r.stdout, r.stderr)
            return 1
        with open(out) as f:
            again = json.load(f)
    ok = (again["rules"], again["default"]) == (doc["rules"], doc["default"])
    if not ok:
        print("%s differs from accl-tune --from-raw %s:\n%s" % (shipped, measured, json.dumps(again["rules"], indent=1)))
    print("check_accl_tune shipped default: %s" % ("passed" if ok else "FAILED"))
    return 0 if ok else 1


def main():
    if sys.argv[1] == "--shipped":
        return shipped_default(*sys.argv[2:6])
    tune, info = sys.argv[1], sys.argv[2]
    raw = {"rounds": 2, "seconds": 1, "load": [0, 0, 0], "load_end": [0, 0, 0], "configs": [
        # allreduce np2: offloaded 2x faster from 16 B on, except a lone win at 4 B (smoothing drops it)
        config("allreduce", 2, [10, 10, 10, 10, 10, 10], [5, 20, 5, 5, 5, 5]),
        # allgather np4: wins at 16-64 B, of which only 32 B with both neighbours: a closed window, in layer
        # bytes (x 4 ranks)
        config("allgather", 4, [10] * 6, [20, 20, 5, 5, 5, 20]),
        # bcast np2: 1.05x only, below the 1.1x margin
        config("bcast", 2, [10.5] * 6, [10] * 6),
        # bw (MB/s, higher is better) np2 wins everywhere, latency np2 loses at 4 B: p2p stays native
        config("bw", 2, [100] * 6, [300] * 6),
        config("latency", 2, [1] * 6, [2, 0.5, 0.5, 0.5, 0.5, 0.5]),
        # barrier np4
        {"bench": "barrier", "np": 4, "runs": 2, "failed": "", "native": {"0": 10}, "offload": {"0": 2}},
    ]}
    with tempfile.TemporaryDirectory() as d:
        raw_path, out = os.path.join(d, "raw.json"), os.path.join(d, "tuning.json")
        with open(raw_path, "w") as f:
            json.dump(raw, f)
        r = subprocess.run([sys.executable, tune, "--from-raw", raw_path, "--out", out], capture_output=True,
                           text=True, timeout=60)
        if r.returncode != 0:
            print(r.stdout, r.stderr)
            return 1
        with open(out) as f:
            rules = json.load(f)["rules"]
        expect = [
            {"call": ["allgather", "iallgather"], "ranks": [4, 4], "bytes": [128, 128], "use": "offload"},
            {"call": ["allreduce", "iallreduce"], "ranks": [2, 2], "bytes": [32, None], "use": "offload"},
            {"call": ["barrier", "ibarrier"], "ranks": [4, 4], "use": "offload"},
        ]
        ok = rules == expect
        if not ok:
            print("rules:\n%s\nexpected:\n%s" % (json.dumps(rules, indent=1), json.dumps(expect, indent=1)))
        # Two hosts: a size is offloaded only where both gain. The second loses allreduce at 128 B (smoothing
        # then also drops 64 B), measures no allgather, and loses barrier.
        second = {"rounds": 2, "seconds": 1, "load": [0, 0, 0], "load_end": [0, 0, 0], "configs": [
            config("allreduce", 2, [10] * 6, [5, 5, 5, 5, 5, 20]),
            {"bench": "barrier", "np": 4, "runs": 2, "failed": "", "native": {"0": 2}, "offload": {"0": 10}},
        ]}
        second_path, both, combined = (os.path.join(d, n) for n in ("second.json", "both.json", "combined.json"))
        with open(second_path, "w") as f:
            json.dump(second, f)
        expect_both = [{"call": ["allreduce", "iallreduce"], "ranks": [2, 2], "bytes": [32, 32], "use": "offload"}]
        for args in (["--from-raw", raw_path + "," + second_path, "--raw", combined], ["--from-raw", combined]):
            r = subprocess.run([sys.executable, tune] + args + ["--out", both], capture_output=True, text=True,
                               timeout=60)
            with open(both) as f:
                rules_both = json.load(f)["rules"] if r.returncode == 0 else None
            if rules_both != expect_both:
                print("two hosts (%s): rules %s, expected %s %s" % (" ".join(args), rules_both, expect_both, r.stderr))
                ok = False
        env = dict(os.environ, ACCL_POLICY="auto", ACCL_TUNING_FILE=out)
        c = subprocess.run([info, "--check-settings"], env=env, capture_output=True, text=True, timeout=60)
        if c.returncode != 0:
            print("accl-info --check-settings rejects the written file: %s%s" % (c.stdout, c.stderr))
            ok = False
    print("check_accl_tune: %s" % ("passed" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
