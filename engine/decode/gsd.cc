#include "engine/decode/gsd.h"

#include <typeinfo>


namespace mulo::engine {
namespace {

SjdOptions JacobiOf(const GsdOptions& o) {
  SjdOptions jacobi;
  jacobi.window = o.window;
  jacobi.init = o.init;
  return jacobi;
}

}  // namespace

Status ValidateGsdOptions(const GsdOptions& o) {
  MULO_RETURN_IF_ERROR(ValidateJacobiWindow(o.window, "gsd"));
  if (o.group.size < 1 || o.group.size > 1024) {
    return InvalidArgumentError("gsd.group_size: must be in [1, 1024]");
  }
  if (!(o.group.max_probability_gap >= 0.0 && o.group.max_probability_gap <= 1.0)) {
    return InvalidArgumentError("gsd.max_probability_gap: must be in [0, 1]");
  }
  if (!(o.group.max_embedding_distance >= 0.0 && o.group.max_embedding_distance <= 1e12)) {
    return InvalidArgumentError("gsd.max_embedding_distance: must be in [0, 1e12]");
  }
  return OkStatus();
}

GsdDecoder::GsdDecoder(GsdOptions options) : SjdDecoder(JacobiOf(options)), gsd_(options) {}

Status GsdDecoder::Validate(const ModelSet& models) const {
  if (models.target == nullptr) return FailedPreconditionError("gsd: no target model");
  return ValidateGsdOptions(gsd_);
}

std::optional<SjdDecoder::GraphRules> GsdDecoder::RulesInGraphs() const {
  if (typeid(*this) != typeid(GsdDecoder)) return std::nullopt;
  return GraphRules{gsd_.group, /*couple=*/false};
}

std::unique_ptr<Verifier> GsdDecoder::MakeVerifier(const ModelSet& models) const {
  return std::make_unique<GroupVerifier>(gsd_.group,
                                         models.target->token_embedding_weight());
}

}  // namespace mulo::engine
