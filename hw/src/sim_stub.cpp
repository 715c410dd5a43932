// SPDX-License-Identifier: Apache-2.0
//
// make_sim_device() of a build without ZeroMQ or nlohmann-json: the rest of
// libaccl_hw, and the ACCL_SIM_* settings check, are still there.
#include <accl_hw/sim.hpp>

namespace accl::hw {

std::unique_ptr<Device> make_sim_device(const SimOptions&) {
  throw SimError("ACCL_DEVICE=sim: libaccl_hw was built without ZeroMQ and nlohmann-json (install libzmq3-dev, "
                 "cppzmq-dev and nlohmann-json3-dev, e.g. with scripts/install-deps.sh, and rebuild)");
}

bool built_with_sim() { return false; }

}  // namespace accl::hw
