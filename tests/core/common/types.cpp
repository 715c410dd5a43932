// SPDX-License-Identifier: Apache-2.0
#include "types.hpp"

#include <cstring>

namespace acclt {

std::string type_name(dataType t) {
  switch (t) {
    case dataType::none: return "none";
    case dataType::int8: return "int8";
    case dataType::float16: return "float16";
    case dataType::float32: return "float32";
    case dataType::float64: return "float64";
    case dataType::int32: return "int32";
    case dataType::int64: return "int64";
    default: break;
  }
  return "type" + std::to_string(static_cast<unsigned>(t));
}

std::string op_name(reduceFunction f) {
  switch (f) {
    case reduceFunction::SUM: return "SUM";
    case reduceFunction::MAX: return "MAX";
    case reduceFunction::MIN: return "MIN";
    case reduceFunction::PROD: return "PROD";
    default: break;
  }
  return "op" + std::to_string(static_cast<unsigned>(f));
}

Pattern pattern_for(reduceFunction f) {
  switch (f) {
    case reduceFunction::SUM: return Pattern::sum;
    case reduceFunction::MAX:
    case reduceFunction::MIN: return Pattern::minmax;
    case reduceFunction::PROD: return Pattern::prod;
    default: break;
  }
  return Pattern::sum;
}

double pattern_value(Pattern p, dataType t, unsigned rank, size_t index, uint32_t seed) {
  const uint64_t i = index, r = rank, s = seed;
  switch (p) {
    case Pattern::unique:
      // float16 holds every integer up to 2048 exactly: keep to [-1000, 1000].
      if (t == dataType::float16) return static_cast<double>((r * 257 + i * 3 + s * 11) % 2001) - 1000.0;
      // Others: rank in the high part, index below (exact in float32 up to 2^24).
      return static_cast<double>(r * (1u << 20) + ((i + s * 7) % (1u << 20)));
    case Pattern::sum:
      return static_cast<double>((i * 7 + r * 13 + s * 3) % 11) - 5.0;
    case Pattern::minmax:
      return static_cast<double>((i * 7 + r * 29 + s * 5) % 201) - 100.0;
    case Pattern::prod: {
      static const double vals[] = {1, 2, -1, 1, -2, 1, 2};
      return vals[(i * 3 + r * 5 + s) % 7];
    }
    case Pattern::compressed: {
      // [1, 2) in steps of 1/3001: most values need rounding in fp16.
      const double v = 1.0 + static_cast<double>((i * 37 + r * 101 + s * 13) % 3001) / 3001.0;
      return static_cast<double>(static_cast<float>(v));
    }
  }
  return 0;
}

std::string count_name(CountKind c) {
  switch (c) {
    case CountKind::one: return "c1";
    case CountKind::c17: return "c17";
    case CountKind::rxbuf: return "cRxBuf";
    case CountKind::rxbuf_plus1: return "cRxBufPlus1";
    case CountKind::mib: return "c1MiB";
    case CountKind::eager_multi: return "c3RxBufPlus5";
    case CountKind::eager_limit: return "cEagerMax";
    case CountKind::eager_limit_plus1: return "cEagerMaxPlus1";
    case CountKind::rndzv_limit: return "cScratch";
    case CountKind::rndzv_limit_plus1: return "cScratchPlus1";
  }
  return "c?";
}

size_t count_of(CountKind c, dataType t, size_t rx_bytes, size_t eager_bytes, size_t rndzv_bytes) {
  if (rndzv_bytes == 0) rndzv_bytes = 32 * 1024;
  if (eager_bytes == 0) eager_bytes = rx_bytes;
  const size_t eb = elem_bytes(t);
  switch (c) {
    case CountKind::one: return 1;
    case CountKind::c17: return 17;
    case CountKind::rxbuf: return rx_bytes / eb;
    case CountKind::rxbuf_plus1: return rx_bytes / eb + 1;
    case CountKind::mib: return (size_t{1} << 20) / eb;
    case CountKind::eager_multi: return 3 * (rx_bytes / eb) + 5;
    case CountKind::eager_limit: return eager_bytes / eb;
    case CountKind::eager_limit_plus1: return eager_bytes / eb + 1;
    case CountKind::rndzv_limit: return rndzv_bytes / eb;
    case CountKind::rndzv_limit_plus1: return rndzv_bytes / eb + 1;
  }
  return 1;
}

std::string placement_name(Placement p) {
  switch (p) {
    case Placement::device: return "device";
    case Placement::host: return "host";
    case Placement::mixed: return "mixed";
  }
  return "?";
}

Options& options() {
  static Options o;
  return o;
}

void parse_options(int* argc, char** argv) {
  Options& o = options();
  if (const char* q = std::getenv("ACCL_TEST_QUICK"); q != nullptr && *q != '\0' && std::strcmp(q, "0") != 0)
    o.quick = true;
  int out = 1;
  for (int i = 1; i < *argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--world-size=", 0) == 0) o.world_size = static_cast<unsigned>(std::stoul(a.substr(13)));
    else if (a.rfind("--transport=", 0) == 0) o.transport = a.substr(12);
    else if (a == "--quick") o.quick = true;
    else argv[out++] = argv[i];
  }
  *argc = out;
  argv[out] = nullptr;
}

}  // namespace acclt
