# SPDX-License-Identifier: Apache-2.0
"""Arithmetic configurations of the CCLO datapath: :class:`ACCLArithConfig`, the driver's defaults
(``ACCL_DEFAULT_ARITH_CONFIG``) and their conversion for libaccl."""

import numpy as np

from . import _pyaccl
from .buffer import native_type
from .errors import ACCLArgumentError


class ACCLArithConfig:
    """An arithmetic configuration for the ACCL hardware datapath.

    The datapath includes a variety of hardware functions for compression and
    reduction. Compression functions convert between compressed and
    uncompressed representations of data. Reduction functions apply
    arithmetic-logic functions to two buffers, producing a third. Each class
    of hardware function is identified by a unique ID.

    Args:
        uncompressed_elem_bytes (int): Number of bytes in the uncompressed datatype
        compressed_elem_bytes (int): Number of bytes in the compressed datatype
        elem_ratio_log (int): Log of number of uncompressed elements required to produce one
            compressed element
        compressor_tdest (int): Hardware function ID of compressor
        decompressor_tdest (int): Hardware function ID of decompressor
        arith_is_compressed (bool): Indicate whether any arithmetic is to be performed on compressed
            or uncompressed data.
        arith_tdest (list of int): List of hardware function IDs corresponding to the supported
            reduction operations (indexed by ACCLReduceFunctions)
    """

    def __init__(self, uncompressed_elem_bytes, compressed_elem_bytes, elem_ratio_log, compressor_tdest,
                 decompressor_tdest, arith_is_compressed, arith_tdest):
        self.uncompressed_elem_bytes = uncompressed_elem_bytes
        self.compressed_elem_bytes = compressed_elem_bytes
        self.elem_ratio_log = elem_ratio_log
        self.compressor_tdest = compressor_tdest
        self.decompressor_tdest = decompressor_tdest
        self.arith_is_compressed = arith_is_compressed
        self.arith_tdest = list(arith_tdest)

    def _to_native(self):
        cfg = _pyaccl.ArithConfig()
        cfg.uncompressed_elem_bytes = int(self.uncompressed_elem_bytes)
        cfg.compressed_elem_bytes = int(self.compressed_elem_bytes)
        cfg.elem_ratio_log = int(self.elem_ratio_log)
        cfg.compressor_tdest = int(self.compressor_tdest)
        cfg.decompressor_tdest = int(self.decompressor_tdest)
        cfg.arith_is_compressed = bool(self.arith_is_compressed)
        cfg.arith_tdest = [int(t) for t in self.arith_tdest]
        return cfg

    def __repr__(self):
        return (f"ACCLArithConfig({self.uncompressed_elem_bytes}, {self.compressed_elem_bytes}, "
                f"{self.elem_ratio_log}, {self.compressor_tdest}, {self.decompressor_tdest}, "
                f"{self.arith_is_compressed}, {self.arith_tdest})")


def _is_numpy_type(name):
    try:
        np.dtype(name)
    except TypeError:
        return False
    return True


def _default_arith_config():
    """The driver's defaults, keyed by numpy type names as in seed 003."""
    table = {}
    for (uncompressed, compressed), cfg in _pyaccl.default_arith_config().items():
        # The packed (value, index) pair types of MINLOC/MAXLOC have no numpy type: not offered here.
        if not all(_is_numpy_type(t.name) for t in (uncompressed, compressed)):
            continue
        table[(uncompressed.name, compressed.name)] = ACCLArithConfig(
            cfg.uncompressed_elem_bytes, cfg.compressed_elem_bytes, cfg.elem_ratio_log, cfg.compressor_tdest,
            cfg.decompressor_tdest, cfg.arith_is_compressed, cfg.arith_tdest)
    return table


#: (float16,float16) (float32,float16) (float32,float32) (float64,float64) (int32,int32) (int64,int64),
#: each with the function ids of SUM, MAX, MIN and PROD (integers also BAND..LXOR), and the extension types
#: the device loads when it reports them: int8, uint8, int16, uint16, uint32, uint64 (SUM..LXOR). The driver's
#: packed (value, index) pair types of MINLOC/MAXLOC have no numpy type and are not offered in Python.
ACCL_DEFAULT_ARITH_CONFIG = _default_arith_config()


def _native_arith_config(arith_config):
    if not isinstance(arith_config, dict):
        raise ACCLArgumentError("accl: arith_config must be a dict {(dtype, dtype): ACCLArithConfig}")
    table = {}
    for key, cfg in arith_config.items():
        try:
            uncompressed, compressed = key
        except (TypeError, ValueError):
            raise ACCLArgumentError(f"accl: arith_config key {key!r} is not a pair of data types") from None
        table[(native_type(uncompressed, "arith_config"), native_type(compressed, "arith_config"))] = cfg._to_native()
    return table
