#include "engine/sampling/philox.h"

#include "engine/sampling/rng.h"

namespace mulo::engine {
namespace {

// A host stream's n-th number is the device draw at position n of the same role (rng.h).
static_assert(static_cast<int64_t>(DrawRole::kTarget) == static_cast<int64_t>(RngStream::kTarget));
static_assert(static_cast<int64_t>(DrawRole::kDrafter) ==
              static_cast<int64_t>(RngStream::kDrafter));
static_assert(static_cast<int64_t>(DrawRole::kAcceptance) ==
              static_cast<int64_t>(RngStream::kAcceptance));

constexpr int64_t kWordMask = 0xFFFFFFFFLL;
constexpr int64_t kHalfMask = 0xFFFFLL;
// The round multipliers and the key increments (Weyl sequence) of Philox4x32.
constexpr int64_t kMultiplier0 = 0xD2511F53LL;
constexpr int64_t kMultiplier1 = 0xCD9E8D57LL;
constexpr int64_t kKeyStep0 = 0x9E3779B9LL;
constexpr int64_t kKeyStep1 = 0xBB67AE85LL;

torch::Tensor ShiftRight(const torch::Tensor& x, int64_t bits) { return x.__rshift__(bits); }
torch::Tensor ShiftLeft(const torch::Tensor& x, int64_t bits) { return x.__lshift__(bits); }

// The high and low 32-bit words of multiplier * word, exactly, in int64: the word is split
// into 16-bit halves so that no partial product reaches 2^63.
std::pair<torch::Tensor, torch::Tensor> MulHiLo(int64_t multiplier, const torch::Tensor& word) {
  const torch::Tensor low_part = (word & kHalfMask) * multiplier;          // < 2^48
  const torch::Tensor high_part = ShiftRight(word, 16) * multiplier;       // < 2^48
  const torch::Tensor hi = ShiftRight(high_part + ShiftRight(low_part, 16), 16);  // < 2^32
  const torch::Tensor lo = (ShiftLeft(high_part & kHalfMask, 16) + low_part) & kWordMask;
  return {hi, lo};
}

}  // namespace

torch::Tensor Philox4x32(const torch::Tensor& counter, const torch::Tensor& key, int rounds) {
  TORCH_CHECK(counter.scalar_type() == torch::kInt64 && counter.size(-1) == 4,
              "Philox4x32: counter must be int64 [..., 4]");
  TORCH_CHECK(key.scalar_type() == torch::kInt64 && key.size(-1) == 2,
              "Philox4x32: key must be int64 [..., 2]");
  torch::Tensor c0 = counter.select(-1, 0), c1 = counter.select(-1, 1);
  torch::Tensor c2 = counter.select(-1, 2), c3 = counter.select(-1, 3);
  torch::Tensor k0 = key.select(-1, 0), k1 = key.select(-1, 1);
  for (int round = 0; round < rounds; ++round) {
    if (round > 0) {
      k0 = (k0 + kKeyStep0) & kWordMask;
      k1 = (k1 + kKeyStep1) & kWordMask;
    }
    auto [hi0, lo0] = MulHiLo(kMultiplier0, c0);
    auto [hi1, lo1] = MulHiLo(kMultiplier1, c2);
    torch::Tensor next0 = hi1.bitwise_xor(c1).bitwise_xor(k0);
    torch::Tensor next2 = hi0.bitwise_xor(c3).bitwise_xor(k1);
    c0 = std::move(next0);
    c1 = std::move(lo1);
    c2 = std::move(next2);
    c3 = std::move(lo0);
  }
  return torch::stack({c0, c1, c2, c3}, -1);
}

torch::Tensor DrawCounters(const torch::Tensor& positions, int64_t draw, DrawRole role) {
  TORCH_CHECK(positions.scalar_type() == torch::kInt64, "DrawCounters: positions must be int64");
  TORCH_CHECK(draw >= 0 && draw <= kWordMask, "DrawCounters: draw must fit 32 bits");
  return torch::stack({positions & kWordMask, ShiftRight(positions, 32) & kWordMask,
                       torch::full_like(positions, draw),
                       torch::full_like(positions, static_cast<int64_t>(role))},
                      -1);
}

torch::Tensor SeedKey(uint64_t seed, const torch::Device& device) {
  const int64_t low = static_cast<int64_t>(seed & 0xFFFFFFFFULL);
  const int64_t high = static_cast<int64_t>(seed >> 32);
  return torch::tensor({low, high}, torch::TensorOptions().dtype(torch::kInt64).device(device));
}

torch::Tensor UniformFromWords(const torch::Tensor& words) {
  // 27 bits of the first word and 26 of the second: (a * 2^26 + b) / 2^53, exact in double.
  const torch::Tensor a = ShiftRight(words.select(-1, 0), 5);
  const torch::Tensor b = ShiftRight(words.select(-1, 1), 6);
  return (a * (int64_t{1} << 26) + b).to(torch::kFloat64) * (1.0 / 9007199254740992.0);
}

torch::Tensor CounterUniforms(uint64_t seed, DrawRole role, const torch::Tensor& positions,
                              int64_t draw) {
  return UniformFromWords(
      Philox4x32(DrawCounters(positions, draw, role), SeedKey(seed, positions.device())));
}

torch::Tensor StreamUniforms(const Rng& rng, int64_t count, const torch::Device& device) {
  const auto first = static_cast<int64_t>(rng.index());
  return CounterUniforms(rng.seed(), static_cast<DrawRole>(static_cast<int64_t>(rng.stream())),
                         torch::arange(first, first + count,
                                       torch::TensorOptions().dtype(torch::kInt64).device(device)));
}

}  // namespace mulo::engine
