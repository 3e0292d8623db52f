// One Philox4x32-10 block in plain integer arithmetic: the host side of the counter-based
// generator whose tensor form is philox.h. Both give the same words for the same counter and
// key (tests/engine/sampling/philox_test.cc), so a number drawn on the host and one drawn on a
// device for the same (seed, role, index) are equal.
#ifndef MULO_ENGINE_SAMPLING_PHILOX_BLOCK_H_
#define MULO_ENGINE_SAMPLING_PHILOX_BLOCK_H_

#include <array>
#include <cstdint>

namespace mulo::engine {

using PhiloxWords = std::array<uint32_t, 4>;

inline PhiloxWords PhiloxBlock(PhiloxWords counter, uint32_t key0, uint32_t key1) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key0 += 0x9E3779B9u;
      key1 += 0xBB67AE85u;
    }
    const uint64_t p0 = uint64_t{0xD2511F53u} * counter[0];
    const uint64_t p1 = uint64_t{0xCD9E8D57u} * counter[2];
    counter = {static_cast<uint32_t>(p1 >> 32) ^ counter[1] ^ key0, static_cast<uint32_t>(p1),
               static_cast<uint32_t>(p0 >> 32) ^ counter[3] ^ key1, static_cast<uint32_t>(p0)};
  }
  return counter;
}

// The uniform in [0, 1) of a block: 27 bits of word 0 and 26 of word 1 (as UniformFromWords).
inline double PhiloxUniform(const PhiloxWords& words) {
  return static_cast<double>((uint64_t{words[0] >> 5} << 26) | (words[1] >> 6)) * 0x1.0p-53;
}

}  // namespace mulo::engine

#endif  // MULO_ENGINE_SAMPLING_PHILOX_BLOCK_H_
