#include "engine/model/text_conditioner.h"

#include <cctype>
#include <sstream>

#include "engine/core/torch_guard.h"
#include "engine/model/json_fields.h"
#include "engine/model/transformer_config.h"

namespace mulo::engine {
namespace {

constexpr int64_t kPad = 0;
constexpr int64_t kUnknown = 1;

StatusOr<TextConditionerConfig> ParseConfig(const std::string& path) {
  MULO_ASSIGN_OR_RETURN(nlohmann::json doc, JsonFields::ParseFile(path));
  JsonFields f(doc, path);
  TextConditionerConfig c;
  MULO_ASSIGN_OR_RETURN(c.vocab_size, f.Int("vocab_size", 2, 1 << 24));
  MULO_ASSIGN_OR_RETURN(c.dim, f.Int("dim", 1, 1 << 16));
  MULO_ASSIGN_OR_RETURN(c.n_layer, f.Int("n_layer", 1, 256));
  MULO_ASSIGN_OR_RETURN(c.n_head, f.Int("n_head", 1, 256));
  MULO_ASSIGN_OR_RETURN(c.max_tokens, f.Int("max_tokens", 1, 1 << 16));
  MULO_ASSIGN_OR_RETURN(int64_t multiple_of, f.Int("multiple_of", 1, 1 << 16, 256));
  MULO_ASSIGN_OR_RETURN(c.norm_eps, f.Number("norm_eps", 0.0, 1.0, 1e-5));
  if (c.dim % c.n_head != 0) return f.Error("n_head", "must divide dim");
  c.ffn_hidden_dim = LlamaFfnHiddenDim(c.dim, multiple_of, 0.0);
  return c;
}

}  // namespace

StatusOr<std::shared_ptr<const TextConditioner>> TextConditioner::LoadDirectory(
    const std::string& dir, const LoadOptions& options) {
  std::shared_ptr<TextConditioner> model(new TextConditioner());
  MULO_ASSIGN_OR_RETURN(model->config_, ParseConfig(dir + "/config.json"));
  const auto& c = model->config_;
  const std::string vocab_path = dir + "/vocab.json";
  MULO_ASSIGN_OR_RETURN(nlohmann::json vocab, JsonFields::ParseFile(vocab_path, /*object=*/false));
  if (!vocab.is_array() || static_cast<int64_t>(vocab.size()) != c.vocab_size) {
    return InvalidArgumentError(vocab_path + ": expected a list of " +
                                std::to_string(c.vocab_size) + " words");
  }
  for (size_t i = 0; i < vocab.size(); ++i) {
    if (!vocab[i].is_string()) return InvalidArgumentError(vocab_path + ": entries must be strings");
    model->vocab_[vocab[i].get<std::string>()] = static_cast<int64_t>(i);
  }
  const std::string weights = dir + "/model.safetensors";
  MULO_ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::Open(weights, options));
  MULO_RETURN_IF_ERROR(GuardTorch(weights, [&]() -> Status {
    MULO_ASSIGN_OR_RETURN(model->tok_embeddings_,
                          ckpt.Get("tok_embeddings.weight", {c.vocab_size, c.dim}));
    MULO_ASSIGN_OR_RETURN(model->pos_embeddings_,
                          ckpt.Get("pos_embeddings", {c.max_tokens, c.dim}));
    const BlockShape shape{c.dim, c.n_head, c.n_head, c.ffn_hidden_dim, c.norm_eps};
    for (int64_t i = 0; i < c.n_layer; ++i) {
      MULO_ASSIGN_OR_RETURN(Block block,
                            Block::Load(ckpt, "layers." + std::to_string(i) + ".", shape));
      model->layers_.push_back(std::move(block));
    }
    MULO_ASSIGN_OR_RETURN(model->norm_, ckpt.Get("norm.weight", {c.dim}));
    return OkStatus();
  }));
  return std::shared_ptr<const TextConditioner>(std::move(model));
}

StatusOr<std::vector<int64_t>> TextConditioner::Tokenize(const std::string& prompt) const {
  std::string spaced;
  for (char ch : prompt) {
    if (ch == ':' || ch == ',') {
      spaced += ' ';
      spaced += ch;
      spaced += ' ';
    } else {
      spaced += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    }
  }
  std::istringstream words(spaced);
  std::vector<int64_t> ids;
  for (std::string word; words >> word;) {
    auto it = vocab_.find(word);
    ids.push_back(it == vocab_.end() ? kUnknown : it->second);
  }
  if (ids.empty()) return InvalidArgumentError("prompt: is empty");
  if (static_cast<int64_t>(ids.size()) > config_.max_tokens) {
    return InvalidArgumentError("prompt: " + std::to_string(ids.size()) +
                                " tokens, more than the conditioner's maximum of " +
                                std::to_string(config_.max_tokens));
  }
  ids.resize(config_.max_tokens, kPad);
  return ids;
}

StatusOr<torch::Tensor> TextConditioner::Encode(const std::string& prompt) const {
  MULO_ASSIGN_OR_RETURN(std::vector<int64_t> ids, Tokenize(prompt));
  return GuardTorch("TextConditioner::Encode", [&]() -> StatusOr<torch::Tensor> {
    at::NoGradGuard no_grad;
    auto index = torch::tensor(ids, torch::kInt64).to(tok_embeddings_.device());
    auto h = (tok_embeddings_.index_select(0, index) + pos_embeddings_).unsqueeze(0);
    for (int64_t i = 0; i < config_.n_layer; ++i) {
      h = layers_[i].Forward(h, torch::Tensor(), torch::Tensor(), nullptr, i);
    }
    return RmsNorm(h, norm_, config_.norm_eps).squeeze(0).to(torch::kFloat32);
  });
}

}  // namespace mulo::engine
