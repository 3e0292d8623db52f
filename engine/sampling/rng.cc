#include "engine/sampling/rng.h"

#include "engine/sampling/philox_block.h"

namespace mulo::engine {
namespace {

PhiloxWords Block(uint64_t index, uint32_t role, uint32_t key0, uint32_t key1) {
  return PhiloxBlock({static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32), 0u, role},
                     key0, key1);
}

}  // namespace

Rng::Rng(uint64_t seed, RngStream stream)
    : key0_(static_cast<uint32_t>(seed)),
      key1_(static_cast<uint32_t>(seed >> 32)),
      role_(static_cast<uint32_t>(stream)) {}

uint64_t Rng::Next() {
  const PhiloxWords words = Block(index_++, role_, key0_, key1_);
  return (uint64_t{words[0]} << 32) | words[1];
}

double Rng::Uniform() { return PhiloxUniform(Block(index_++, role_, key0_, key1_)); }

}  // namespace mulo::engine
