// SPDX-License-Identifier: Apache-2.0
#include <accl/abi.hpp>
#include <accl/error.hpp>

#include <algorithm>
#include <array>
#include <cstdio>
#include <iterator>

namespace accl {
namespace {

// Bit i of RETCODE -> name. Bits 0..26 follow the ErrorCode table of public
// ACCL; bits 16 and 17 carry their current meaning (seed 003 still lists the
// 2022 names OPEN_PORT_NOT_SUCCEEDED / OPEN_CON_NOT_SUCCEEDED, but no call
// opens ports any more and our firmware sets them for invalid thresholds, as
// public ACCL's HEAD does). Bits 27..31 are the abi.hpp extensions.
constexpr std::array<const char*, 32> kBitNames = {
    "DMA_MISMATCH_ERROR",
    "DMA_INTERNAL_ERROR",
    "DMA_DECODE_ERROR",
    "DMA_SLAVE_ERROR",
    "DMA_NOT_OKAY_ERROR",
    "DMA_NOT_END_OF_PACKET_ERROR",
    "DMA_NOT_EXPECTED_BTT_ERROR",
    "DMA_TIMEOUT_ERROR",
    "CONFIG_SWITCH_ERROR",
    "DEQUEUE_BUFFER_TIMEOUT_ERROR",
    "DEQUEUE_BUFFER_SPARE_BUFFER_STATUS_ERROR",
    "RECEIVE_TIMEOUT_ERROR",
    "DEQUEUE_BUFFER_SPARE_BUFFER_DMATAG_MISMATCH",
    "DEQUEUE_BUFFER_SPARE_BUFFER_INDEX_ERROR",
    "COLLECTIVE_NOT_IMPLEMENTED",
    "RECEIVE_OFFCHIP_SPARE_BUFF_ID_NOT_VALID",
    "EAGER_THRESHOLD_INVALID",
    "RENDEZVOUS_THRESHOLD_INVALID",
    "DMA_SIZE_ERROR",
    "ARITH_ERROR",
    "PACK_TIMEOUT_STS_ERROR",
    "PACK_SEQ_NUMBER_ERROR",
    "COMPRESSION_ERROR",
    "KRNL_TIMEOUT_STS_ERROR",
    "KRNL_STS_COUNT_ERROR",
    "SEGMENTER_EXPECTED_BTT_ERROR",
    "DMA_TAG_MISMATCH_ERROR",
    "INVALID_ARGUMENT",
    "NOT_CONFIGURED",
    "LINK_ERROR",
    "TRUNCATION_ERROR",
    "NOT_READY_ERROR",
};

// Keep the table and the ABI from drifting apart.
static_assert(abi::kDmaTagMismatchError == 1u << 26);
static_assert(abi::kInvalidArgument == 1u << 27 && abi::kNotReady == 1u << 31);

std::string device_error_text(const std::string& call, int rank, uint32_t retcode) {
  char hex[16];
  std::snprintf(hex, sizeof hex, "0x%08x", retcode);
  std::string text = "call '" + call + "' on rank " + std::to_string(rank) + " failed on the device: " +
                     error_code_to_string(retcode) + " (retcode " + hex + ")";
  // The driver checks a call's own arguments before the device sees it; on a
  // collective the firmware reports INVALID_ARGUMENT when the ranks' calls
  // disagree (argument signature in every message, firmware/README.md).
  static const char* const kCollectives[] = {"bcast",          "scatter",  "gather",  "reduce", "allgather",
                                             "allreduce",      "alltoall", "barrier", "reduce_scatter"};
  const bool collective = std::find(std::begin(kCollectives), std::end(kCollectives), call) != std::end(kCollectives);
  if (collective && (retcode & abi::kInvalidArgument) != 0) {
    text += "; the ranks called this collective with different arguments (count, root, reduce function, data "
            "type or compression)";
  }
  return text;
}

}  // namespace

std::vector<std::string> error_bit_names(uint32_t retcode) {
  std::vector<std::string> names;
  for (uint32_t bit = 0; bit < kBitNames.size(); ++bit)
    if (retcode & (1u << bit)) names.emplace_back(kBitNames[bit]);
  return names;
}

std::string error_code_to_string(uint32_t retcode) {
  if (retcode == 0) return "OK";
  std::string text;
  for (const auto& name : error_bit_names(retcode)) {
    if (!text.empty()) text += " | ";
    text += name;
  }
  return text;
}

DeviceError::DeviceError(std::string call, int rank, uint32_t retcode)
    : Error(call, rank, device_error_text(call, rank, retcode)), retcode_(retcode) {}

}  // namespace accl
