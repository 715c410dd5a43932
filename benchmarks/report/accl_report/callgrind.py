# SPDX-License-Identifier: Apache-2.0
"""Instruction counts under valgrind --tool=callgrind: the pure interposition cost (ACCL_OFFLOAD=off
vs native) and where an offloaded 8 B hop spends its instructions, layer by layer."""

import json
import os
import re
import shutil

from .common import accl_env_for, first_error_line, log, mpi_env, mpirun_cmd, run


def parse_callgrind(path):
    """-> (totals Ir, edges {(caller_ob, caller_fn, callee_ob, callee_fn): [calls, inclusive Ir]})."""
    names = {"ob": {}, "fn": {}, "fl": {}}
    edges = {}
    total = 0
    ob = fn = None
    cob = cfn = None
    pending = None

    def name(kind, text):
        m = re.match(r"\((\d+)\)(?:\s+(.*))?$", text.strip())
        table = names["fn" if kind in ("fn", "cfn") else ("ob" if kind in ("ob", "cob") else "fl")]
        if m:
            if m.group(2) is not None:
                table[m.group(1)] = m.group(2)
            return table.get(m.group(1), "?")
        return text.strip()

    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            c = line[0]
            if c.isdigit() or c in "+-*":
                if pending is not None:
                    parts = line.split()
                    incl = int(parts[1]) if len(parts) > 1 else 0
                    key = (ob, fn, cob if cob is not None else ob, cfn)
                    e = edges.setdefault(key, [0, 0])
                    e[0] += pending
                    e[1] += incl
                    pending = None
                    cob = None
                continue
            if line.startswith("ob="):
                ob = name("ob", line[3:])
            elif line.startswith("fn="):
                fn = name("fn", line[3:])
            elif line.startswith("cob="):
                cob = name("cob", line[4:])
            elif line.startswith("cfn="):
                cfn = name("cfn", line[4:])
            elif line.startswith("cfi=") or line.startswith("cfl="):
                name("fl", line[4:])
            elif line.startswith("fl=") or line.startswith("fi=") or line.startswith("fe="):
                name("fl", line[3:])
            elif line.startswith("calls="):
                pending = int(line[6:].split()[0])
            elif line.startswith("totals:") or line.startswith("summary:"):
                try:
                    total = max(total, int(line.split(":")[1].split()[0]))
                except (IndexError, ValueError):
                    pass
    return total, edges


def interposition_cost(files, calls):
    """Sums over rank files: app->MPI_X (wrapper or libmpi) and wrapper->PMPI_X edges for X in calls."""
    res = {"calls": 0, "incl": 0, "inner": 0, "total": 0, "wrapped": False}
    for path in files:
        total, edges = parse_callgrind(path)
        res["total"] += total
        for (cob_, cfn_, eob, efn), (n, incl) in edges.items():
            callee_base = os.path.basename(eob or "")
            caller_base = os.path.basename(cob_ or "")
            for x in calls:
                if efn in ("MPI_" + x, "PMPI_" + x):
                    in_pmpi_layer = "accl_pmpi" in callee_base
                    from_app = not caller_base.startswith("libmpi") and "accl" not in caller_base
                    if from_app and (in_pmpi_layer or callee_base.startswith("libmpi")):
                        res["calls"] += n
                        res["incl"] += incl
                        res["wrapped"] = res["wrapped"] or in_pmpi_layer
                    elif "accl" in caller_base and callee_base.startswith("libmpi"):
                        res["inner"] += incl
    return res


def run_callgrind(args):
    if not shutil.which("valgrind"):
        return {"error": "valgrind not found"}
    cgdir = os.path.join(args.logdir, "callgrind")
    os.makedirs(cgdir, exist_ok=True)
    cases = [("latency", ["-m", "8:8"], ["Send", "Recv"]), ("allreduce", ["-m", "8:8"], ["Allreduce"])]
    out = {}
    for bench, margs, calls in cases:
        prog = args.binaries.get(bench)
        if prog is None:
            continue
        row = {}
        modes = [("native", None)]
        if args.pmpi_lib:
            modes.append(("interposed", {"LD_PRELOAD": args.pmpi_lib, "ACCL_OFFLOAD": "off"}))
        for mode, env in modes:
            for f in os.listdir(cgdir):
                if f.startswith("cg.%s.%s." % (bench, mode)):
                    os.unlink(os.path.join(cgdir, f))
            wrapper = ["valgrind", "--tool=callgrind", "--compress-strings=no", "--compress-pos=no",
                       "--callgrind-out-file=" + os.path.join(cgdir, "cg.%s.%s.%%p" % (bench, mode))]
            cmd = mpirun_cmd(args, 2, prog, margs + ["-i", str(args.callgrind_iters), "-x", "10"], env, wrapper)
            rc, so, se, dt = run(cmd, env=mpi_env(), timeout=max(args.timeout, 900),
                                 log_path=os.path.join(args.logdir, "callgrind-%s-%s.log" % (bench, mode)))
            files = [os.path.join(cgdir, f) for f in os.listdir(cgdir) if f.startswith("cg.%s.%s." % (bench, mode))]
            if rc != 0 or not files:
                row[mode] = {"error": "exit %d: %s" % (rc, first_error_line(se, so))}
                continue
            row[mode] = interposition_cost(files, calls)
            log("callgrind %s %s: %s (%.0f s)" % (bench, mode, json.dumps(row[mode]), dt))
        out[bench] = row
    return out


# The layers an offloaded MPI_Send passes through, outermost first: each entry
# is (label, function name prefix). Costs are inclusive, so a layer's own
# share is its entry's cost minus the next entry's.
SEND_LAYERS = [
    ("PMPI layer (matching state, envelope, slot budget)", "MPI_Send"),
    ("driver (checks, call encoding, request)", "accl::ACCL::send("),
    ("emulated CCLO call controller (call queue, completion)", "accl::emu::EmuDevice::start("),
    ("firmware passes (decode, slot, send step)", "accl::fw::ControlProgram::poll("),
    ("data plane move (plan, resolve buffers)", "accl::emu::EmuDataPlane::move("),
    ("transport (link table, shm ring write)", "accl::emu::LinkTable::send("),
]
# Inside MPI_Recv: what is not on the critical path (posting the next envelope
# receive, while the message flies) and what a wait-loop round costs.
RECV_PARTS = [
    ("posting the envelope receive (driver + device, off the critical path)", "accl::ACCL::recv("),
    ("wait-loop rounds (progress: device test, transport poll, firmware passes)", "accl::pmpi::progress_locked("),
    ("Open MPI progress (PMPI_Iprobe, every 16th round at most)", "accl::pmpi::native_progress("),
]
# Counted per call: lock and trylock calls, clock reads (glibc's internal
# aliases included: which name callgrind shows depends on the glibc build).
HOP_COUNTERS = [("mutex lock calls", ("pthread_mutex_lock", "___pthread_mutex_lock", "__pthread_mutex_lock",
                                      "pthread_mutex_trylock", "___pthread_mutex_trylock", "__pthread_mutex_trylock")),
                ("clock reads", ("clock_gettime", "__clock_gettime"))]


def hop_name_matches(name, prefix):
    """C++ entries are prefixes ending in "(" (any overload); C ones (MPI_Send) are whole names, so that
    MPI_Send does not also count MPI_Sendrecv. A symbol version (@@GLIBC_x) is ignored."""
    if not name:
        return False
    return name.startswith(prefix) if prefix.endswith("(") else name.split("@")[0] == prefix


def hop_inclusive(edges, prefix):
    """-> (calls, inclusive Ir) of the functions `prefix` names, counting only calls from other functions:
    a recursive call, direct or through others (callgrind names a re-entered function F'2, F'3, ...), would
    count its cost twice."""
    calls = incl = 0
    for (cob_, cfn_, eob, efn), (n, cost) in edges.items():
        if hop_name_matches(efn, prefix) and not hop_name_matches(cfn_, prefix) and not re.search(r"'\d+$", efn):
            calls += n
            incl += cost
    return calls, incl


def hop_profile_of(files, entry, parts, counters=HOP_COUNTERS):
    """Per call of `entry` over rank files collected with --toggle-collect=entry: its inclusive instructions,
    each part's inclusive instructions and calls, and the counters' calls."""
    res = {"calls": 0, "incl": 0, "parts": {p: [0, 0] for _, p in parts},
           "counters": {label: 0 for label, _ in counters}}
    for path in files:
        _, edges = parse_callgrind(path)
        n, incl = hop_inclusive(edges, entry)
        res["calls"] += n
        res["incl"] += incl
        for _, prefix in parts:
            c, i = hop_inclusive(edges, prefix)
            res["parts"][prefix][0] += c
            res["parts"][prefix][1] += i
        for label, names in counters:
            # One call per entry into the group: clock_gettime -> __clock_gettime is one clock read.
            res["counters"][label] += sum(n_ for (cob_, cfn_, eob, efn), (n_, _) in edges.items()
                                          if any(hop_name_matches(efn, name) for name in names)
                                          and not any(hop_name_matches(cfn_, name) for name in names))
    return res


def run_hop_profile(args):
    """Offloaded 8 B osu_latency under callgrind, once collecting inside MPI_Send only, once inside MPI_Recv."""
    if not shutil.which("valgrind"):
        return {"error": "valgrind not found"}
    prog = args.binaries.get("latency")
    if prog is None or not args.pmpi_lib:
        return {"error": "needs osu_latency and libaccl_pmpi.so"}
    cgdir = os.path.join(args.logdir, "callgrind")
    os.makedirs(cgdir, exist_ok=True)
    out = {"iters": args.callgrind_iters}
    for side, entry, parts in (("send", "MPI_Send", SEND_LAYERS), ("recv", "MPI_Recv", RECV_PARTS)):
        tag = "cg.hop-%s." % side
        for f in os.listdir(cgdir):
            if f.startswith(tag):
                os.unlink(os.path.join(cgdir, f))
        wrapper = ["valgrind", "--tool=callgrind", "--compress-strings=no", "--compress-pos=no",
                   "--toggle-collect=" + entry, "--callgrind-out-file=" + os.path.join(cgdir, tag + "%p")]
        cmd = mpirun_cmd(args, 2, prog, ["-m", "8:8", "-i", str(args.callgrind_iters), "-x", "10"],
                         accl_env_for(args), wrapper)
        rc, so, se, dt = run(cmd, env=mpi_env(), timeout=max(args.timeout, 900),
                             log_path=os.path.join(args.logdir, "callgrind-hop-%s.log" % side))
        files = [os.path.join(cgdir, f) for f in os.listdir(cgdir) if f.startswith(tag)]
        if rc != 0 or len(files) != 2:
            out[side] = {"error": "exit %d, %d profile files of 2: %s" % (rc, len(files), first_error_line(se, so))}
            continue
        out[side] = hop_profile_of(files, entry, parts)
        log("callgrind hop %s: %d calls, %.0f Ir/call (%.0f s)" % (
            side, out[side]["calls"], out[side]["incl"] / max(1, out[side]["calls"]), dt))
    return out
