// Seeded random numbers for sampling: xoshiro256** seeded through SplitMix64.
//
// Our own generator (rather than torch's) makes a request's draws depend only on (seed,
// stream), identical on CPU and GPU builds and across LibTorch versions. Independent streams
// of one seed (e.g. the target's and a drafter's) never share draws, so changing how many
// numbers one consumes leaves the other's sequence untouched.
#ifndef MULO_ENGINE_SAMPLING_RNG_H_
#define MULO_ENGINE_SAMPLING_RNG_H_

#include <cstdint>

namespace mulo::engine {

// Well-known stream ids of one request.
enum class RngStream : uint64_t {
  kTarget = 0,
  kDrafter = 1,
  kAcceptance = 2,
};

class Rng {
 public:
  explicit Rng(uint64_t seed, RngStream stream = RngStream::kTarget);

  uint64_t Next();
  // Uniform double in [0, 1) with 53 random bits.
  double Uniform();

 private:
  uint64_t s_[4];
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_SAMPLING_RNG_H_
