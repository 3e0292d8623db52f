// A counter-based random generator computed with tensor ops: Philox4x32-10 (Salmon, Moraes,
// Dror and Shaw, "Parallel Random Numbers: As Easy as 1, 2, 3", SC 2011).
//
// Each number is a pure function of (key, counter), so a draw needs no generator state and no
// order: the numbers for any set of positions come out of one batch of integer tensor ops, on
// whichever device the positions live, and are the same on the CPU and on CUDA. A request's
// draws are keyed by (seed, role, position, draw): key = the seed's two 32-bit halves, counter
// = (position's low and high word, draw, role). The sequential host generator (rng.h) stays
// for the host-side decision code until the device path replaces it.
//
// 32-bit words live in int64 tensors (values in [0, 2^32)): LibTorch has no unsigned 32-bit
// arithmetic on every device, and a 32 x 32-bit product split into 16-bit halves stays below
// 2^49, so every step is exact in int64.
#ifndef MULO_ENGINE_SAMPLING_PHILOX_H_
#define MULO_ENGINE_SAMPLING_PHILOX_H_

#include <torch/types.h>

#include "engine/sampling/rng.h"

#include <cstdint>

namespace mulo::engine {

// Who draws. Each role has its own counter space, so how many numbers one role uses never moves
// another's (the same promise as RngStream's separate streams).
enum class DrawRole : int64_t {
  kTarget = 0,      // the target's tokens (ar, re-sampling, bonus tokens)
  kDrafter = 1,     // a drafter's tokens
  kAcceptance = 2,  // keep-or-reject decisions of a verifier
  kHead = 3,        // the EAGLE head's draws
};

inline constexpr int kPhiloxRounds = 10;

// Philox4x32 over `counter` (int64 [..., 4], each a 32-bit word) with `key` (int64 [..., 2],
// broadcast against the counter's leading dimensions): int64 [..., 4] of 32-bit words.
// `rounds` is 10 for Philox4x32-10; fewer exist only for the statistical test's control.
torch::Tensor Philox4x32(const torch::Tensor& counter, const torch::Tensor& key,
                         int rounds = kPhiloxRounds);

// The counter block of every draw: int64 [..., 4] = (position low word, position high word,
// draw, role) for each element of `positions` (int64, any shape, values >= 0).
torch::Tensor DrawCounters(const torch::Tensor& positions, int64_t draw, DrawRole role);

// The key of a request's seed: int64 [2] = (low word, high word), on `device`.
torch::Tensor SeedKey(uint64_t seed, const torch::Device& device);

// Uniform doubles in [0, 1) with 53 random bits, from the first two words of each block
// (int64 [..., 4] from Philox4x32): [...].
torch::Tensor UniformFromWords(const torch::Tensor& words);

// One uniform in [0, 1) per element of `positions`, for draw number `draw` of `role` in the
// request seeded `seed`: float64, the shape and device of `positions`.
torch::Tensor CounterUniforms(uint64_t seed, DrawRole role, const torch::Tensor& positions,
                              int64_t draw = 0);

// The next `count` numbers of `rng`, as `count` calls of its Uniform() would return them:
// float64 [count] on `device`. `rng` does not move: the caller Skips what it consumed.
torch::Tensor StreamUniforms(const Rng& rng, int64_t count, const torch::Device& device);

}  // namespace mulo::engine

#endif  // MULO_ENGINE_SAMPLING_PHILOX_H_
