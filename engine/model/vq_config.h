// Configuration of a LlamaGen VQ tokenizer (config.json beside the weights).
#ifndef MULO_ENGINE_MODEL_VQ_CONFIG_H_
#define MULO_ENGINE_MODEL_VQ_CONFIG_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/core/status.h"

namespace mulo::engine {

struct VqConfig {
  int64_t codebook_size = 16384;
  int64_t codebook_embed_dim = 8;
  int64_t z_channels = 256;
  int64_t ch = 128;
  std::vector<int64_t> ch_mult = {1, 1, 2, 2, 4};
  int64_t num_res_blocks = 2;
  int64_t norm_groups = 32;  // GroupNorm groups (upstream: 32)
  bool codebook_l2_norm = true;
  int64_t out_channels = 3;

  // Pixels per token side: 2^(levels - 1).
  int64_t downsample_factor() const { return int64_t{1} << (ch_mult.size() - 1); }
};

StatusOr<VqConfig> ParseVqConfig(const nlohmann::json& doc, const std::string& source);
StatusOr<VqConfig> LoadVqConfig(const std::string& path);

}  // namespace mulo::engine

#endif  // MULO_ENGINE_MODEL_VQ_CONFIG_H_
