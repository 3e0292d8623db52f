// The registry of token-model architectures: which class a component's config.json names.
//
//   "architecture" absent or "llamagen": Transformer (LlamaGen GPT, Tar AR-DTok)
//   "qwen2", "llama":                    CausalLm (a language model writing image tokens)
//   "janus":                             JanusModel (Janus-Pro's generation path)
//
// A new architecture adds one entry to Architectures() (architectures.cc) and its class
// (a DecoderOnlyModel, or any TokenModel); nothing in the decoding methods, the session, the
// engine loop or the server changes.
#ifndef MULO_ENGINE_MODEL_ARCHITECTURES_H_
#define MULO_ENGINE_MODEL_ARCHITECTURES_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/status.h"
#include "engine/model/checkpoint.h"
#include "engine/model/token_model.h"

namespace mulo::engine {

// What a loader is given: the component directory, the load options, and the grid the family
// wants written (0: the model's own; a language model has none of its own).
struct TokenModelSource {
  std::string dir;
  LoadOptions options;
  int64_t grid_size = 0;
};

struct Architecture {
  std::string name;
  std::function<StatusOr<std::shared_ptr<const TokenModel>>(const TokenModelSource&)> load;
};

// Every architecture this build serves, in registry order (the first is the default).
std::vector<Architecture> Architectures();

// The architecture <dir>/config.json names ("llamagen" when it names none), or
// INVALID_ARGUMENT naming `architecture` and listing the known ones.
StatusOr<std::string> ArchitectureOf(const std::string& dir);

// Loads the component at source.dir with its architecture's loader.
StatusOr<std::shared_ptr<const TokenModel>> LoadTokenModel(const TokenModelSource& source);

}  // namespace mulo::engine

#endif  // MULO_ENGINE_MODEL_ARCHITECTURES_H_
