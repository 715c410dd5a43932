// SPDX-License-Identifier: Apache-2.0
//
// bench-validation: the -c data patterns of the OSU-style benchmarks. fill()
// and check() work block by block; this compares them with pattern(), the
// definition, element by element, and checks that check() finds every
// corrupted element (also across block boundaries) and nothing else.
// No MPI calls: only the harness's helpers.
#include "osu_common.hpp"

#include <cmath>

using namespace bosu;

namespace {

int failures = 0;

void expect(bool ok, const std::string& what) {
  if (ok) return;
  std::fprintf(stderr, "FAILED: %s\n", what.c_str());
  ++failures;
}

template <typename T>
T element(const std::vector<unsigned char>& buf, size_t i) {
  T v;
  std::memcpy(&v, buf.data() + i * sizeof(T), sizeof(T));
  return v;
}

template <typename T>
void corrupt(std::vector<unsigned char>& buf, size_t i) {
  T v = element<T>(buf, i);
  v = static_cast<T>(v + 1);
  std::memcpy(buf.data() + i * sizeof(T), &v, sizeof(T));
}

template <typename T>
void run_type(Type t) {
  const size_t counts[] = {0, 1, 2, 96, 97, 98, kPatternBlock - 1, kPatternBlock, kPatternBlock + 1, 100003};
  struct Key {
    int a, b, iter;
    long scale;
  };
  const Key keys[] = {{0, 0, 0, 1}, {3, 5, 17, 1}, {7, 0, 123456, 10}, {1, 2, 3, 36}};
  for (const size_t count : counts) {
    for (const Key& k : keys) {
      const std::string name = std::string(type_name(t)) + " count " + std::to_string(count) + " key " +
                               std::to_string(k.a) + "/" + std::to_string(k.b) + "/" + std::to_string(k.iter) +
                               " scale " + std::to_string(k.scale);
      // One spare element behind the data: fill must not write past count.
      std::vector<unsigned char> buf((count + 1) * sizeof(T), 0xA5);
      fill(t, buf.data(), count, k.a, k.b, k.iter, static_cast<int>(k.scale));
      bool same = true;
      for (size_t i = 0; i < count && same; ++i) {
        const T want = static_cast<T>(static_cast<long>(pattern(k.a, k.b, i, k.iter)) * k.scale);
        same = element<T>(buf, i) == want;
        if (!same) expect(false, name + ": fill differs from pattern() at element " + std::to_string(i));
      }
      for (size_t j = count * sizeof(T); j < buf.size(); ++j) expect(buf[j] == 0xA5, name + ": fill wrote past count");

      const long errors_before = ctx().errors;
      expect(check(t, buf.data(), count, k.a, k.b, k.iter, k.scale, "test") == 0, name + ": check of filled data");
      expect(ctx().errors == errors_before, name + ": no errors counted");
      if (count > 0) {
        expect(check(t, buf.data(), count, k.a, k.b, k.iter + 1, k.scale, "test") > 0,
               name + ": check against another iteration fails");
      }
      // Corrupt the first and last element and both sides of a block boundary.
      std::vector<size_t> spots;
      if (count > 0) spots = {0, count - 1};
      if (count > kPatternBlock) spots.insert(spots.end(), {kPatternBlock - 1, kPatternBlock});
      std::sort(spots.begin(), spots.end());
      spots.erase(std::unique(spots.begin(), spots.end()), spots.end());
      for (const size_t i : spots) corrupt<T>(buf, i);
      const long before = ctx().errors;
      const long bad = check(t, buf.data(), count, k.a, k.b, k.iter, k.scale, "test (corrupted on purpose)");
      expect(bad == static_cast<long>(spots.size()),
             name + ": check found " + std::to_string(bad) + " of " + std::to_string(spots.size()) + " corruptions");
      expect(ctx().errors - before == bad, name + ": errors counted");
    }
  }
}

}  // namespace

int main() {
  ctx().program = "bench-validation";
  run_type<char>(Type::mpi_char);
  run_type<int32_t>(Type::mpi_int);
  run_type<float>(Type::mpi_float);
  if (failures != 0) {
    std::fprintf(stderr, "%d failures\n", failures);
    return 1;
  }
  std::printf("fill/check agree with pattern() for every type, size and key; every corruption found\n");
  return 0;
}
