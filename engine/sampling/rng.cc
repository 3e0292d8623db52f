#include "engine/sampling/rng.h"

namespace mulo::engine {
namespace {

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

Rng::Rng(uint64_t seed, RngStream stream) {
  // Mix the stream id in through a second SplitMix64 round so nearby (seed, stream) pairs give
  // unrelated states.
  uint64_t state = seed;
  const uint64_t seed_mix = SplitMix64(state);
  state = seed_mix ^ (static_cast<uint64_t>(stream) * 0xD1B54A32D192ED03ULL);
  for (auto& word : s_) word = SplitMix64(state);
}

uint64_t Rng::Next() {
  const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = Rotl(s_[3], 45);
  return result;
}

double Rng::Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

}  // namespace mulo::engine
