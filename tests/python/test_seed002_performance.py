# SPDX-License-Identifier: Apache-2.0
"""Seed 002 ("ACCL Performance"): the notebook's code cells, run as written.

The cells below are the notebook's, verbatim, except that each IPython
`%timeit -r R -n N stmt` line is the equivalent
`timeit.repeat('stmt', repeat=R, number=N, globals=globals())`; the harness
provides the `timeit` module as IPython provides the magic. The cells run in
order in one namespace, like a notebook kernel.
"""

import timeit

CELLS = [
    r'''from pyaccl import accl
import numpy as np

RUN_ON_HARDWARE = False
XCLBIN = "axis3x.xclbin"

if RUN_ON_HARDWARE:
    WORLD_SIZE = 3
    RXBUF_SIZE = 16*1024*1024
else:
    WORLD_SIZE = 4
    RXBUF_SIZE = 16*1024

assert not RUN_ON_HARDWARE or WORLD_SIZE <= 3

accl_instances = []
for i in range(WORLD_SIZE):
    if RUN_ON_HARDWARE:
        accl_instances.append(accl(WORLD_SIZE, i, bufsize=RXBUF_SIZE, xclbin=XCLBIN, cclo_idx=i))
    else:
        accl_instances.append(accl(WORLD_SIZE, i, bufsize=RXBUF_SIZE, sim_mode=True))

def allocate_in_all(count, dtype=np.float32):
    op0_buffers = []
    op1_buffers = []
    res_buffers = []
    for i in range(WORLD_SIZE):    
        op0_buffers.append(accl_instances[i].allocate((count,)))
        op1_buffers.append(accl_instances[i].allocate((count,)))
        res_buffers.append(accl_instances[i].allocate((count,)))
        op0_buffers[i][:] = [1.0*i for i in range(count)]
        op1_buffers[i][:] = [1.0*i for i in range(count)]
    return op0_buffers, op1_buffers, res_buffers

op0_buf, op1_buf, res_buf = allocate_in_all(RXBUF_SIZE)
op0_buf_fp16, op1_buf_fp16, res_buf_fp16 = allocate_in_all(RXBUF_SIZE, dtype=np.float16)''',
    r'''timeit.repeat('accl_instances[0].copy(op0_buf[0], res_buf[0], 1)', repeat=4, number=10, globals=globals())
timeit.repeat('accl_instances[0].copy(op0_buf[0], res_buf[0], 1024/4)', repeat=4, number=10, globals=globals())
timeit.repeat('accl_instances[0].copy(op0_buf[0], res_buf[0], RXBUF_SIZE/4)', repeat=4, number=10, globals=globals())''',
    r'''timeit.repeat('accl_instances[0].copy(op0_buf[0], res_buf[0], 1, from_fpga=True, to_fpga=True)', repeat=4, number=10, globals=globals())
timeit.repeat('accl_instances[0].copy(op0_buf[0], res_buf[0], 1024/4, from_fpga=True, to_fpga=True)', repeat=4, number=10, globals=globals())
timeit.repeat('accl_instances[0].copy(op0_buf[0], res_buf[0], RXBUF_SIZE/4, from_fpga=True, to_fpga=True)', repeat=4, number=10, globals=globals())''',
    r'''timeit.repeat('accl_instances[0].copy(op0_buf_fp16[0], res_buf_fp16[0], 2, from_fpga=True, to_fpga=True)', repeat=4, number=10, globals=globals())
timeit.repeat('accl_instances[0].copy(op0_buf_fp16[0], res_buf_fp16[0], 1024/2, from_fpga=True, to_fpga=True)', repeat=4, number=10, globals=globals())
timeit.repeat('accl_instances[0].copy(op0_buf_fp16[0], res_buf_fp16[0], RXBUF_SIZE/2, from_fpga=True, to_fpga=True)', repeat=4, number=10, globals=globals())''',
    r'''import time

def overlap_computation(count):
    handle = accl_instances[0].copy(op0_buf[0], res_buf[0], count, from_fpga=True, to_fpga=True, run_async=True)
    time.sleep(0.1)
    handle.wait()

timeit.repeat('overlap_computation(1)', repeat=4, number=10, globals=globals())
timeit.repeat('overlap_computation(1024/4)', repeat=4, number=10, globals=globals())
timeit.repeat('overlap_computation(RXBUF_SIZE/4)', repeat=4, number=10, globals=globals())''',
    r'''for i in range(WORLD_SIZE):
    accl_instances[i].deinit()''',
]


def test_notebook_cells_run_as_written():
    namespace = {"__name__": "__seed002__", "timeit": timeit}
    try:
        for index, cell in enumerate(CELLS):
            exec(compile(cell, f"<seed 002 cell {index}>", "exec"), namespace)
    finally:
        # Drop the instances (and their emulated CCLOs) before the next module.
        namespace.clear()
