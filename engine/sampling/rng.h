// Seeded random numbers for sampling, one stream per role of a request.
//
// A stream is counter-based: its n-th number is Philox4x32-10 of the counter (n, draw 0,
// role) under the key of the seed (philox_block.h), a pure function of (seed, role, n). So the
// n-th uniform of a stream equals CounterUniforms(seed, role, position n) computed with tensor
// ops on any device (philox.h): a method that draws its target token for position i as the
// stream's i-th number (as ar does) can draw it on the device instead and get the same token.
// Independent streams of one seed (the target's, a drafter's) never share numbers, so how many
// one consumes leaves the others untouched; neither depends on LibTorch's generators.
#ifndef MULO_ENGINE_SAMPLING_RNG_H_
#define MULO_ENGINE_SAMPLING_RNG_H_

#include <cstdint>

namespace mulo::engine {

// Well-known stream ids of one request (the same numbers as philox.h's DrawRole).
enum class RngStream : uint64_t {
  kTarget = 0,
  kDrafter = 1,
  kAcceptance = 2,
};

class Rng {
 public:
  explicit Rng(uint64_t seed, RngStream stream = RngStream::kTarget);

  // 64 random bits (words 0 and 1 of the next block).
  uint64_t Next();
  // Uniform double in [0, 1) with 53 random bits (from the next block).
  double Uniform();
  // Numbers drawn so far: the index of the next one.
  uint64_t index() const { return index_; }
  // The seed and the stream this generator draws for (its numbers' key and role).
  uint64_t seed() const { return (uint64_t{key1_} << 32) | key0_; }
  RngStream stream() const { return static_cast<RngStream>(role_); }
  // Moves past `n` numbers drawn elsewhere (on the device, philox.h's StreamUniforms).
  void Skip(uint64_t n) { index_ += n; }

 private:
  uint32_t key0_, key1_;
  uint32_t role_;
  uint64_t index_ = 0;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_SAMPLING_RNG_H_
