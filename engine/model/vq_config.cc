#include "engine/model/vq_config.h"

#include "engine/model/json_fields.h"

namespace mulo::engine {

StatusOr<VqConfig> ParseVqConfig(const nlohmann::json& doc, const std::string& source) {
  JsonFields f(doc, source);
  VqConfig c;
  constexpr int64_t kBig = int64_t{1} << 20;
  MULO_ASSIGN_OR_RETURN(c.codebook_size, f.Int("codebook_size", 2, kBig));
  MULO_ASSIGN_OR_RETURN(c.codebook_embed_dim, f.Int("codebook_embed_dim", 1, 4096));
  MULO_ASSIGN_OR_RETURN(c.z_channels, f.Int("z_channels", 1, 65536));
  MULO_ASSIGN_OR_RETURN(c.ch, f.Int("ch", 1, 65536));
  MULO_ASSIGN_OR_RETURN(c.ch_mult, f.IntList("ch_mult", 1, 64));
  MULO_ASSIGN_OR_RETURN(c.num_res_blocks, f.Int("num_res_blocks", 1, 64));
  MULO_ASSIGN_OR_RETURN(c.norm_groups, f.Int("norm_groups", 1, 65536, 32));
  MULO_ASSIGN_OR_RETURN(c.codebook_l2_norm, f.Bool("codebook_l2_norm", true));
  MULO_ASSIGN_OR_RETURN(c.out_channels, f.Int("out_channels", 1, 4, 3));
  if (c.ch_mult.size() > 8) return f.Error("ch_mult", "at most 8 levels");
  for (int64_t mult : c.ch_mult) {
    if ((c.ch * mult) % c.norm_groups != 0) {
      return f.Error("norm_groups", "every level's channels (ch * ch_mult) must be divisible by " +
                                        std::to_string(c.norm_groups));
    }
  }
  return c;
}

StatusOr<VqConfig> LoadVqConfig(const std::string& path) {
  MULO_ASSIGN_OR_RETURN(nlohmann::json doc, JsonFields::ParseFile(path));
  return ParseVqConfig(doc, path);
}

}  // namespace mulo::engine
