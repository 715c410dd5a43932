# SPDX-License-Identifier: Apache-2.0
"""Constants of the ACCL API (seed 003 "Constants").

The values are the CCLO's: they travel in call words and RETCODE bits, so
they must match abi/include/accl/abi.hpp.
"""

from enum import IntEnum

#: Tag matching any tag (send and recv default).
TAG_ANY = 0xFFFFFFFF
#: The global communicator every instance starts with.
GLOBAL_COMM = 0


class ACCLReduceFunctions(IntEnum):
    """CCLO reduction functions (index into an arithmetic config's arith_tdest)."""

    SUM = 0  #: Elementwise sum of vectors
    MAX = 1  #: Elementwise maximum
    MIN = 2  #: Elementwise minimum (extension of this implementation)
    PROD = 3  #: Elementwise product (extension of this implementation)
    # Extensions on integer types (device capability word: bitwise / logical).
    BAND = 4  #: Bitwise and
    BOR = 5  #: Bitwise or
    BXOR = 6  #: Bitwise exclusive or
    LAND = 7  #: Logical and (result 0 or 1)
    LOR = 8  #: Logical or
    LXOR = 9  #: Logical exclusive or
    # Extensions on packed (value, index) pair types (capability word: loc).
    MINLOC = 10  #: Smallest value and its index (equal values: the lower index)
    MAXLOC = 11  #: Largest value and its index (equal values: the lower index)


class ACCLCompressionFlags(IntEnum):
    """Compression flags."""

    NO_COMPRESSION = 0  #: No compression
    OP0_COMPRESSED = 1  #: First input buffer is compressed
    OP1_COMPRESSED = 2  #: Second input buffer is compressed
    RES_COMPRESSED = 4  #: Result buffer is compressed
    ETH_COMPRESSED = 8  #: Apply over-the-wire compression


class ACCLStreamFlags(IntEnum):
    """Stream flags."""

    NO_STREAM = 0  #: No streaming. All operands and results are in memory
    OP0_STREAM = 1  #: The first operand is pulled from stream instead of memory
    RES_STREAM = 2  #: The result is pushed to stream instead of memory


class ErrorCode(IntEnum):
    """Error codes returned by the CCLO kernel (RETCODE bits).

    The names and values of seed 003 come first; later names for the same
    bits are aliases, and bits 27..31 are this implementation's extensions.
    """

    DMA_MISMATCH_ERROR = 1 << 0
    DMA_INTERNAL_ERROR = 1 << 1
    DMA_DECODE_ERROR = 1 << 2
    DMA_SLAVE_ERROR = 1 << 3
    DMA_NOT_OKAY_ERROR = 1 << 4
    DMA_NOT_END_OF_PACKET_ERROR = 1 << 5
    DMA_NOT_EXPECTED_BTT_ERROR = 1 << 6
    DMA_TIMEOUT_ERROR = 1 << 7
    CONFIG_SWITCH_ERROR = 1 << 8
    DEQUEUE_BUFFER_TIMEOUT_ERROR = 1 << 9
    DEQUEUE_BUFFER_SPARE_BUFFER_STATUS_ERROR = 1 << 10
    RECEIVE_TIMEOUT_ERROR = 1 << 11
    DEQUEUE_BUFFER_SPARE_BUFFER_DMATAG_MISMATCH = 1 << 12
    DEQUEUE_BUFFER_SPARE_BUFFER_INDEX_ERROR = 1 << 13
    COLLECTIVE_NOT_IMPLEMENTED = 1 << 14
    RECEIVE_OFFCHIP_SPARE_BUFF_ID_NOT_VALID = 1 << 15
    OPEN_PORT_NOT_SUCCEEDED = 1 << 16
    OPEN_CON_NOT_SUCCEEDED = 1 << 17
    DMA_SIZE_ERROR = 1 << 18
    ARITH_ERROR = 1 << 19
    PACK_TIMEOUT_STS_ERROR = 1 << 20
    PACK_SEQ_NUMBER_ERROR = 1 << 21
    COMPRESSION_ERROR = 1 << 22
    KRNL_TIMEOUT_STS_ERROR = 1 << 23
    KRNL_STS_COUNT_ERROR = 1 << 24
    SEGMENTER_EXPECTED_BTT_ERROR = 1 << 25
    DMA_TAG_MISMATCH_ERROR = 1 << 26
    # Public ACCL's current names of bits 16 and 17 (what our firmware means).
    EAGER_THRESHOLD_INVALID = 1 << 16
    RENDEZVOUS_THRESHOLD_INVALID = 1 << 17
    # Extensions (abi/include/accl/abi.hpp).
    INVALID_ARGUMENT = 1 << 27
    NOT_CONFIGURED = 1 << 28
    LINK_ERROR = 1 << 29
    TRUNCATION_ERROR = 1 << 30
    NOT_READY_ERROR = 1 << 31

    @classmethod
    def decode(cls, retcode):
        """The ErrorCode members of every bit set in ``retcode``."""
        return [cls(1 << bit) for bit in range(32) if retcode & (1 << bit)]
