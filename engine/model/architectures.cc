#include "engine/model/architectures.h"

#include <nlohmann/json.hpp>

#include "engine/model/causal_lm.h"
#include "engine/model/janus_model.h"
#include "engine/model/json_fields.h"
#include "engine/model/transformer.h"

namespace mulo::engine {
namespace {

StatusOr<std::shared_ptr<const TokenModel>> LoadLlamaGen(const TokenModelSource& source) {
  MULO_ASSIGN_OR_RETURN(std::shared_ptr<const Transformer> model,
                        Transformer::LoadDirectory(source.dir, source.options));
  if (source.grid_size != 0 && source.grid_size != model->grid_size()) {
    return InvalidArgumentError(source.dir + "/config.json: grid_size " +
                                std::to_string(model->grid_size()) + ", the family wants " +
                                std::to_string(source.grid_size));
  }
  return std::shared_ptr<const TokenModel>(std::move(model));
}

StatusOr<std::shared_ptr<const TokenModel>> LoadCausalLm(const TokenModelSource& source) {
  if (source.grid_size == 0) {
    return InvalidArgumentError(source.dir +
                                ": a language model writes a grid its family "
                                "chooses; none was given");
  }
  MULO_ASSIGN_OR_RETURN(std::shared_ptr<const CausalLm> model,
                        CausalLm::LoadDirectory(source.dir, source.options, source.grid_size));
  return std::shared_ptr<const TokenModel>(std::move(model));
}

StatusOr<std::shared_ptr<const TokenModel>> LoadJanus(const TokenModelSource& source) {
  MULO_ASSIGN_OR_RETURN(std::shared_ptr<const JanusModel> model,
                        JanusModel::LoadDirectory(source.dir, source.options, source.grid_size));
  return std::shared_ptr<const TokenModel>(std::move(model));
}

}  // namespace

std::vector<Architecture> Architectures() {
  return {
      {"llamagen", LoadLlamaGen},
      {"qwen2", LoadCausalLm},
      {"llama", LoadCausalLm},
      {"janus", LoadJanus},
  };
}

namespace {

// The registry entry <dir>/config.json names (llamagen when it names none).
StatusOr<Architecture> FindArchitecture(const std::string& dir) {
  const std::string path = dir + "/config.json";
  MULO_ASSIGN_OR_RETURN(nlohmann::json doc, JsonFields::ParseFile(path));
  const std::vector<Architecture> architectures = Architectures();
  if (!doc.is_object() || !doc.contains("architecture")) return architectures.front();
  std::string known;
  for (const Architecture& a : architectures) {
    if (doc["architecture"].is_string() && doc["architecture"].get<std::string>() == a.name) {
      return a;
    }
    known += (known.empty() ? "" : ", ") + a.name;
  }
  return InvalidArgumentError(path + ": architecture: " + doc["architecture"].dump() +
                              " is not served (known: " + known + ")");
}

}  // namespace

StatusOr<std::string> ArchitectureOf(const std::string& dir) {
  MULO_ASSIGN_OR_RETURN(Architecture architecture, FindArchitecture(dir));
  return architecture.name;
}

StatusOr<std::shared_ptr<const TokenModel>> LoadTokenModel(const TokenModelSource& source) {
  MULO_ASSIGN_OR_RETURN(Architecture architecture, FindArchitecture(source.dir));
  return architecture.load(source);
}

}  // namespace mulo::engine
