# SPDX-License-Identifier: Apache-2.0
"""The runs of the default-settings section (native vs LD_PRELOAD with the shipped defaults, plus one
ACCL_STATS=1 run each) and of the contended section (idle and busy machine, native and offloaded)."""

import json
import os

from .busy import BusyLoad
from .common import REPO, accl_env_for, log, mpi_env, mpirun_cmd, run
from .parse import Recorder
from .runner import osu_args, run_alternating
from .sections import CONTENDED_MODES, parse_stats


def default_env(args):
    """The ranks' environment under the shipped defaults: the layer preloaded, nothing else (no
    ACCL_POLICY, no ACCL_FALLBACK, not even --accl-env)."""
    return {"LD_PRELOAD": args.pmpi_lib}


def default_args(args, bench):
    return osu_args(args, bench, (1, args.default_max))


def run_default(args, benches, nps):
    """-> {"rec": Recorder of modes native/default/native2 (native2: a second native arm, the control that
    shows how far two native runs of the same protocol drift apart), "stats": {(bench, np): {call: (calls, offloaded, native)}},
    "table", "measured": the tuning table and its measurements}, or {"error": ...}."""
    if not args.pmpi_lib:
        return {"error": "no libaccl_pmpi.so"}
    rec = Recorder()
    run_alternating(args, rec, benches, nps, args.repeats, "default",
                    {"native": None, "default": default_env(args), "native2": None},
                    lambda bench: default_args(args, bench))
    stats = {}
    for np_ in nps:
        for bench in benches:
            prog = args.binaries.get(bench)
            if prog is None:
                continue
            cmd = mpirun_cmd(args, np_, prog, default_args(args, bench), dict(default_env(args), ACCL_STATS="1"))
            rc, out, err, _ = run(cmd, env=mpi_env(), timeout=args.timeout,
                                  log_path=os.path.join(args.logdir, "default-stats-%s-np%d.log" % (bench, np_)))
            stats[(bench, np_)] = parse_stats(err + out) if rc == 0 else {}
    res = {"rec": rec, "stats": stats, "benches": benches, "nps": nps}
    res.update(read_tuning(os.environ.get("ACCL_TUNING_FILE") or
                           os.path.join(REPO, "pmpi", "tuning", "default.json")))
    return res


def read_tuning(path):
    """{"table": the tuning table, "measured": its measurements (<name>.measured.json next to it, {} if none),
    "table_path"}."""
    out = {"table_path": path, "table": {}, "measured": {}}
    try:
        with open(path) as f:
            out["table"] = json.load(f)
    except (OSError, ValueError) as e:
        log("tuning table %s unreadable: %s" % (path, e))
    measured = path[:-len(".json")] + ".measured.json" if path.endswith(".json") else path + ".measured"
    try:
        with open(measured) as f:
            out["measured"] = json.load(f)
    except (OSError, ValueError):
        pass
    return out


def run_contended(args, benches, nps):
    """-> {"rec": Recorder of the four CONTENDED_MODES, "busy": busy processes}, or {"error": ...}. Busy
    runs have a busy loop per core for exactly their duration; a run that times out counts as failed."""
    if not args.pmpi_lib:
        return {"error": "no libaccl_pmpi.so"}
    offload = accl_env_for(args)  # ACCL_FALLBACK=error too: every offloaded number is offloaded work
    envs = dict(zip(CONTENDED_MODES, [None, offload, None, offload]))
    busy = os.cpu_count() or 1
    rec = Recorder()
    run_alternating(args, rec, benches, nps, args.repeats, "contended", envs,
                    lambda bench: osu_args(args, bench, (1, args.contended_max), args.contended_iters,
                                           args.contended_warmup),
                    timeout=args.contended_timeout,
                    around=lambda mode: BusyLoad(busy) if mode.startswith("busy") else None)
    return {"rec": rec, "busy": busy, "benches": benches, "nps": nps}
