# SPDX-License-Identifier: Apache-2.0
"""The PNG plots: finding a plotting tool (matplotlib, else gnuplot) and drawing every benchmark,
accl-bench-core's sweep and its scaling against the ring model."""

import importlib
import os
import shutil
import subprocess
import sys

from .common import human, log, run


def ensure_plotter(allow_install):
    """Returns 'matplotlib', 'gnuplot' or None; installs python3-matplotlib via apt-get if allowed."""
    def have_mpl():
        try:
            importlib.invalidate_caches()
            import matplotlib  # noqa: F401
            return True
        except ImportError:
            return False

    system_python = "/usr/bin/python3"

    def system_python_has_mpl():
        # Started by another interpreter (pyenv, venv) that cannot see Debian's
        # python3-matplotlib: main() re-runs the script under Debian's.
        return os.path.realpath(sys.executable) != os.path.realpath(system_python) and \
            os.path.exists(system_python) and \
            subprocess.run([system_python, "-c", "import matplotlib"], capture_output=True).returncode == 0

    if have_mpl():
        return "matplotlib"
    if system_python_has_mpl():
        return "system-python"
    if shutil.which("gnuplot"):
        return "gnuplot"
    if allow_install and os.geteuid() == 0 and shutil.which("apt-get"):
        log("installing python3-matplotlib with apt-get (once)")
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")

        def apt(*cmd):
            return run(["apt-get"] + list(cmd), env=env, timeout=900)

        rc, _, err, _ = apt("install", "-y", "--no-install-recommends", "python3-matplotlib")
        if rc != 0:
            apt("update")
            rc, _, err, _ = apt("install", "-y", "--no-install-recommends", "python3-matplotlib")
        if rc == 0 and have_mpl():
            return "matplotlib"
        if rc == 0 and system_python_has_mpl():  # installed for Debian's python, not the one running us
            return "system-python"
        log("python3-matplotlib install failed (%s); trying gnuplot" % err.strip().splitlines()[-1:] )
        rc, _, _, _ = apt("install", "-y", "--no-install-recommends", "gnuplot-nox")
        if rc == 0 and shutil.which("gnuplot"):
            return "gnuplot"
    return None


def plot_all(args, rec, plotter, core, scaling):
    made = []
    if plotter is None:
        return made
    series = {}
    for (bench, np_, mode), best in rec.best.items():
        series.setdefault(bench, []).append((np_, mode, best))
    if plotter == "matplotlib":
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        def save(fig, name):
            p = os.path.join(args.out, "plot-%s.png" % name)
            fig.tight_layout()
            fig.savefig(p, dpi=110)
            plt.close(fig)
            made.append(p)

        for bench, lines in sorted(series.items()):
            kind = rec.kind.get(bench, "lat")
            fig, ax = plt.subplots(figsize=(7, 4.5))
            nps = sorted({n for n, _, _ in lines})
            for np_, mode, best in sorted(lines, key=lambda t: (t[0], t[1] != "native")):
                xs = sorted(best)
                if bench == "barrier":
                    continue
                ax.plot([max(x, 0.5) for x in xs], [best[x] for x in xs], marker="o" if mode == "native" else "s",
                        markersize=3, color="C%d" % nps.index(np_),
                        linestyle="-" if mode == "native" else "--", label="%s np=%d" % (mode, np_))
            if bench == "barrier":
                labels, vals = [], []
                for np_, mode, best in sorted(lines):
                    labels.append("%s\nnp=%d" % (mode, np_))
                    vals.append(best.get(0, 0))
                ax.bar(labels, vals)
                ax.set_ylabel("latency (us)")
            else:
                ax.set_xscale("log", base=2)
                ax.set_yscale("log")
                ax.set_xlabel("message size (bytes)")
                ax.set_ylabel("latency (us)" if kind == "lat" else "bandwidth (MB/s)")
                ax.legend(fontsize=8)
            ax.set_title("%s: native Open MPI vs ACCL (best of %d)" % (bench, args.repeats))
            ax.grid(True, which="both", alpha=0.3)
            save(fig, bench)
        rows = core.get("rows") or []
        if rows:
            fig, ax = plt.subplots(figsize=(7, 4.5))
            for op in ("copy", "allreduce"):
                r = [x for x in rows if x["section"] == "sweep" and x["op"] == op and x["check"] == "ok"]
                if r:
                    ax.plot([int(x["bytes"]) for x in r], [float(x["gbps"]) for x in r], marker="o", markersize=3,
                            label="ACCL %s" % op)
            r = [x for x in rows if x["section"] == "sweep" and x["op"] == "copy"]
            if r:
                ax.plot([int(x["bytes"]) for x in r], [float(x["memcpy_gbps"]) for x in r], linestyle=":",
                        label="memcpy")
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("bytes")
            ax.set_ylabel("GB/s")
            ax.set_title("accl-bench-core (4 in-process CCLOs)")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=8)
            save(fig, "core")
        rows = scaling.get("rows") or []
        if rows:
            fig, ax = plt.subplots(figsize=(7, 4.5))
            for size in sorted({int(x["bytes"]) for x in rows}):
                r = sorted([x for x in rows if int(x["bytes"]) == size], key=lambda x: int(x["ranks"]))
                ax.plot([int(x["ranks"]) for x in r], [float(x["time_us"]) / 1e3 for x in r], marker="o",
                        label="measured %s" % human(size))
                ax.plot([int(x["ranks"]) for x in r], [float(x["model2_us"]) / 1e3 for x in r], linestyle="--",
                        label="ring model, shared cores %s" % human(size))
                ax.plot([int(x["ranks"]) for x in r], [float(x["model_us"]) / 1e3 for x in r], linestyle=":",
                        label="ring model, link per rank %s" % human(size))
            ax.set_xlabel("in-process ranks")
            ax.set_ylabel("allreduce time (ms)")
            ax.set_yscale("log")
            ax.set_title("allreduce scaling vs ring model 2(P-1)/P*N")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=7)
            save(fig, "scaling")
    else:  # gnuplot
        for bench, lines in sorted(series.items()):
            if bench == "barrier":
                continue
            kind = rec.kind.get(bench, "lat")
            plots = []
            for i, (np_, mode, best) in enumerate(sorted(lines)):
                dp = os.path.join(args.logdir, "plot-%s-%d.dat" % (bench, i))
                with open(dp, "w") as f:
                    for x in sorted(best):
                        f.write("%d %g\n" % (max(x, 1), best[x]))
                plots.append("'%s' using 1:2 with linespoints dt %d title '%s np=%d'" % (
                    dp, 1 if mode == "native" else 2, mode, np_))
            p = os.path.join(args.out, "plot-%s.png" % bench)
            script = ("set terminal pngcairo size 800,520\nset output '%s'\nset logscale xy\nset grid\n"
                      "set xlabel 'message size (bytes)'\nset ylabel '%s'\nset title '%s: native vs ACCL'\n"
                      "set key left top\nplot %s\n") % (p, "latency (us)" if kind == "lat" else "bandwidth (MB/s)",
                                                       bench, ", ".join(plots))
            gp = os.path.join(args.logdir, "plot-%s.gp" % bench)
            with open(gp, "w") as f:
                f.write(script)
            if run(["gnuplot", gp])[0] == 0:
                made.append(p)
    return made
