# SPDX-License-Identifier: Apache-2.0
"""pyaccl: the Python driver of ACCL (seed 003 API) over libaccl.

    from pyaccl import accl, ACCLReduceFunctions
    inst = accl(4, 0, sim_mode=True)   # rank 0 of 4 emulated CCLOs in this process

Modules: pyaccl.accl (accl, ACCLArithConfig), pyaccl.buffer (ACCLBuffer),
pyaccl.constants (ACCLReduceFunctions, ACCLCompressionFlags, ACCLStreamFlags,
ErrorCode), pyaccl.errors (ACCLError and subclasses).
"""

# In a build tree the extension module (_pyaccl) is built into
# <build>/python/pyaccl/ while these files stay in the source tree; with both
# directories on sys.path this joins them into one package. Installed, both
# are in site-packages/pyaccl/ and this changes nothing.
from pkgutil import extend_path

__path__ = extend_path(__path__, __name__)

from .constants import (GLOBAL_COMM, TAG_ANY, ACCLCompressionFlags, ACCLReduceFunctions,  # noqa: E402
                        ACCLStreamFlags, ErrorCode)
from .errors import ACCLArgumentError, ACCLDeviceError, ACCLError, ACCLTimeoutError  # noqa: E402
from .buffer import ACCLBuffer  # noqa: E402
# Binds pyaccl.accl to the class (seed 000: `from pyaccl import accl`); the
# class forwards unknown attributes to its module, so pyaccl.accl.accl and
# pyaccl.accl.ACCLArithConfig (seed 003 spelling) work too.
from .accl import ACCL_DEFAULT_ARITH_CONFIG, ACCLArithConfig, ACCLRequest, accl  # noqa: E402

__all__ = [
    "accl", "ACCLArithConfig", "ACCLRequest", "ACCL_DEFAULT_ARITH_CONFIG", "ACCLBuffer",
    "ACCLReduceFunctions", "ACCLCompressionFlags", "ACCLStreamFlags", "ErrorCode", "TAG_ANY", "GLOBAL_COMM",
    "ACCLError", "ACCLDeviceError", "ACCLTimeoutError", "ACCLArgumentError",
]
