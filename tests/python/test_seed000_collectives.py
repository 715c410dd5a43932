# SPDX-License-Identifier: Apache-2.0
"""Seed 000 ("ACCL Collectives"): the notebook's code cells, run as written.

The cells below are the notebook's, verbatim, except for RUN_ON_HARDWARE =
False (the emulator branch) instead of True. They run in order in one
namespace, like a notebook kernel.
"""

CELLS = [
    r'''from pyaccl import accl

WORLD_SIZE = 4
RXBUF_SIZE = 16*1024
RUN_ON_HARDWARE = False
XCLBIN = "axis3x.xclbin"

assert not RUN_ON_HARDWARE or WORLD_SIZE <= 3

accl_instances = []
for i in range(WORLD_SIZE):
    if RUN_ON_HARDWARE:
        accl_instances.append(accl(WORLD_SIZE, i, bufsize=RXBUF_SIZE, xclbin=XCLBIN, cclo_idx=i))
    else:
        accl_instances.append(accl(WORLD_SIZE, i, bufsize=RXBUF_SIZE, sim_mode=True))''',
    r'''COUNT = 1000

op0_buffers = []
op1_buffers = []
res_buffers = []
for i in range(WORLD_SIZE):    
    op0_buffers.append(accl_instances[i].allocate((COUNT,)))
    res_buffers.append(accl_instances[i].allocate((COUNT,)))
    op0_buffers[i][:] = [1.0*i for i in range(COUNT)]''',
    r'''import threading
from pyaccl import ACCLReduceFunctions
import numpy as np

def allreduce(n):
    accl_instances[n].allreduce(op0_buffers[n], res_buffers[n], COUNT, ACCLReduceFunctions.SUM)

threads = []
for i in range(WORLD_SIZE):
    threads.append(threading.Thread(target=allreduce, args=(i,)))
    threads[i].start()''',
    r'''for i in range(WORLD_SIZE):
    threads[i].join()
    assert np.isclose(res_buffers[i], sum(op0_buffers)).all()''',
    r'''for i in range(WORLD_SIZE):
    accl_instances[i].deinit()''',
]


def test_notebook_cells_run_as_written():
    namespace = {"__name__": "__seed000__"}
    try:
        for index, cell in enumerate(CELLS):
            exec(compile(cell, f"<seed 000 cell {index}>", "exec"), namespace)
    finally:
        # Drop the instances (and their emulated CCLOs) before the next module.
        namespace.clear()
