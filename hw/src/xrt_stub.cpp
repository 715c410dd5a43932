// SPDX-License-Identifier: Apache-2.0
//
// create_xrt_device() of a build without XRT: the rest of libaccl_hw
// (locality, encoding, the backend over ports) is still there for the
// emulator, accl-info and the tests.
#include <accl_hw/hw.hpp>

namespace accl::hw {

std::unique_ptr<Device> create_xrt_device(const XrtOptions&, NetworkResult*) {
  throw HwError("ACCL_DEVICE=xrt: libaccl_hw was built without XRT (install XRT's development files and rebuild "
                "with -Dxrt=enabled)");
}

bool built_with_xrt() { return false; }
std::string xrt_version() { return ""; }

}  // namespace accl::hw
