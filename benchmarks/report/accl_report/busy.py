# SPDX-License-Identifier: Apache-2.0
"""A busy machine on demand: one CPU-bound process per core for the contended section's runs."""

import os
import subprocess
import sys

# Spins until its parent is gone: even if the report itself is killed (SIGKILL skips every clean-up), its
# busy loops end on their own instead of eating the cores of whatever runs next.
SPIN = "import os\nparent = os.getppid()\nwhile os.getppid() == parent: pass\n"


class BusyLoad:
    """Context manager: `count` (default: one per core) busy-looping processes while the block runs, every one
    killed and reaped on the way out, also when the block raises (a timeout, Ctrl-C)."""

    def __init__(self, count=None):
        self.count = count or os.cpu_count() or 1
        self.procs = []

    def __enter__(self):
        try:
            for _ in range(self.count):
                self.procs.append(subprocess.Popen([sys.executable, "-c", SPIN], stdin=subprocess.DEVNULL,
                                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def pids(self):
        return [p.pid for p in self.procs]

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
        for p in self.procs:
            p.wait()
        self.procs = []
