#include "tests/engine/decode/table_model.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <utility>

#include "engine/core/torch_guard.h"
#include "engine/model/safetensors.h"
#include "engine/model/transformer_config.h"

namespace mulo::engine::testing {
namespace {

// The condition's one row sits at sequence position 0; raster token i at 1 + i.
constexpr int64_t kConditionRows = 1;

std::string ShapeOf(const torch::Tensor& t) {
  if (!t.defined()) return "undefined";
  std::string s = "[";
  for (int64_t d = 0; d < t.dim(); ++d) s += (d ? ", " : "") + std::to_string(t.size(d));
  return s + "]";
}

}  // namespace

TableModel::TableModel(std::shared_ptr<const TableLaw> law, std::shared_ptr<const TableLaw> head,
                       std::shared_ptr<const TableLaw> unconditional)
    : law_(std::move(law)),
      head_(head ? std::move(head) : law_),
      unconditional_(unconditional ? std::move(unconditional) : law_) {
  condition_shape_.mode = ConditionMode::kClassLabel;
  condition_shape_.rows = kConditionRows;
  condition_shape_.num_classes = 1;
  embedding_ = torch::zeros({law_->vocab(), kDim}, torch::kFloat32);
  for (int64_t t = 0; t < law_->vocab(); ++t) embedding_[t][kTokenSlot] = static_cast<float>(t + 1);
}

KvCache TableModel::NewCache(int64_t batch, int64_t capacity) const {
  // One layer, one head of width 2: (sequence position, token) per row.
  return KvCache(1, batch, 1, 2, capacity, torch::dtype(torch::kFloat32));
}

int64_t TableModel::CacheRows(int64_t condition_rows) const {
  return condition_rows + law_->tokens();
}

StatusOr<torch::Tensor> TableModel::EmbedCondition(const Condition& condition,
                                                   bool with_null) const {
  MULO_RETURN_IF_ERROR(CheckClassLabel(condition_shape_, condition.class_label));
  // Both streams read the same marker row (token slot 0: no token): the condition is ignored.
  return torch::zeros({with_null ? 2 : 1, kConditionRows, kDim}, torch::kFloat32);
}

Status TableModel::CheckPrefill(const KvCache& cache,
                                const torch::Tensor& condition_embeddings) const {
  if (cache.length() != 0) return FailedPreconditionError("Prefill: the cache must be empty");
  if (!condition_embeddings.defined() || condition_embeddings.dim() != 3 ||
      condition_embeddings.size(1) != kConditionRows) {
    return InvalidArgumentError("condition: expected [batch, 1, dim], found " +
                                ShapeOf(condition_embeddings));
  }
  return OkStatus();
}

torch::Tensor TableModel::ConditionPositions(int64_t rows) const {
  return torch::arange(kConditionRows - rows, kConditionRows, torch::kInt64);
}

int64_t TableModel::TokenPosition(int64_t /*condition_rows*/, int64_t raster_index) const {
  return kConditionRows + raster_index;
}

StatusOr<torch::Tensor> TableModel::EmbedTokens(const torch::Tensor& tokens) const {
  if (!tokens.defined() || tokens.dim() != 2 || tokens.scalar_type() != torch::kInt64) {
    return InvalidArgumentError("tokens: expected int64 [batch, n], found " + ShapeOf(tokens));
  }
  if (tokens.numel() > 0 &&
      (tokens.min().item<int64_t>() < 0 || tokens.max().item<int64_t>() >= law_->vocab())) {
    return InvalidArgumentError("tokens: outside [0, " + std::to_string(law_->vocab()) + ")");
  }
  return EmbedDrawnTokens(tokens);
}

StatusOr<torch::Tensor> TableModel::EmbedDrawnTokens(const torch::Tensor& tokens) const {
  return embedding_.index_select(0, tokens.flatten().to(torch::kCPU))
      .view({tokens.size(0), tokens.size(1), kDim});
}

Status TableModel::CheckForward(const KvCache& cache, const torch::Tensor& embeddings,
                                const torch::Tensor& positions, const torch::Tensor& mask) const {
  if (!embeddings.defined() || embeddings.dim() != 3 || embeddings.size(0) != cache.batch() ||
      embeddings.size(1) < 1 || embeddings.size(2) != kDim) {
    return InvalidArgumentError("embeddings: expected [" + std::to_string(cache.batch()) +
                                ", n >= 1, 16], found " + ShapeOf(embeddings));
  }
  const int64_t n = embeddings.size(1);
  if (!positions.defined() || positions.dim() != 1 || positions.size(0) != n ||
      positions.scalar_type() != torch::kInt64) {
    return InvalidArgumentError("positions: expected int64 [" + std::to_string(n) + "], found " +
                                ShapeOf(positions));
  }
  if (mask.defined() &&
      (mask.dim() != 2 || mask.size(0) != n || mask.size(1) != cache.length() + n ||
       mask.scalar_type() != torch::kBool)) {
    return InvalidArgumentError("mask: expected bool [" + std::to_string(n) + ", " +
                                std::to_string(cache.length() + n) + "], found " + ShapeOf(mask));
  }
  return OkStatus();
}

std::vector<float> TableModel::Feature(const std::vector<int64_t>& context) const {
  std::vector<float> h(kDim, 0.0f);
  const int64_t length = static_cast<int64_t>(context.size());
  h[0] = 1.0f;
  h[1] = static_cast<float>(length);
  for (int64_t k = 0; k < length; ++k) h[2 + k] = static_cast<float>(context[length - 1 - k] + 1);
  return h;
}

StatusOr<ForwardOutput> TableModel::Forward(KvCache& cache, const torch::Tensor& embeddings,
                                            const torch::Tensor& positions,
                                            const torch::Tensor& mask,
                                            LogitsMode logits_mode) const {
  MULO_RETURN_IF_ERROR(CheckForward(cache, embeddings, positions, mask));
  return GuardTorch("TableModel::Forward", [&]() -> StatusOr<ForwardOutput> {
    const int64_t batch = embeddings.size(0), n = embeddings.size(1);
    const int64_t vocab = law_->vocab(), tokens = law_->tokens();
    const torch::Tensor fed = (embeddings.select(2, kTokenSlot).to(torch::kFloat32) - 1).round();
    if (!fed.eq(fed.select(0, 0).unsqueeze(0)).all().item<bool>()) {
      return InternalError("TableModel: the guidance streams were fed different tokens");
    }
    const torch::Tensor pos = positions.to(torch::kFloat32);
    // New rows' keys: (sequence position, token), the same in every stream.
    const torch::Tensor k =
        torch::stack({pos.unsqueeze(0).expand({batch, n}), fed}, -1).unsqueeze(1).contiguous();
    const int64_t before = cache.length();
    auto [keys, values] = cache.Store(0, k, k);
    const torch::Tensor rows = keys.select(0, 0).select(0, 0).contiguous();  // [before + n, 2]
    const auto row = rows.accessor<float, 2>();
    const torch::Tensor m = mask.defined() ? mask.to(torch::kCPU).contiguous() : torch::Tensor();
    const bool* allowed = m.defined() ? m.data_ptr<bool>() : nullptr;
    const int64_t width = before + n;
    // Stream 0 reads the table, the others (guidance's null condition) the unconditional one.
    std::vector<float> logits(n * vocab), null_logits(n * vocab), hidden(n * kDim, 0.0f);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t own = static_cast<int64_t>(row[before + i][0]) - kConditionRows;
      auto attends = [&](int64_t r) {
        if (allowed != nullptr) return allowed[i * width + r];
        return r < before || r - before <= i;
      };
      if (!attends(before + i)) {
        return InternalError("TableModel: row " + std::to_string(i) + " does not attend itself");
      }
      std::vector<Seen> seen;
      int64_t conditions = 0;
      for (int64_t r = 0; r < before + n; ++r) {
        if (!attends(r)) continue;
        const int64_t raster = static_cast<int64_t>(row[r][0]) - kConditionRows;
        if (raster < 0) {
          ++conditions;
          continue;
        }
        if (raster > own || (raster == own && r != before + i)) {
          return InternalError("TableModel: the row at raster " + std::to_string(own) +
                               " attends a row at raster " + std::to_string(raster));
        }
        seen.push_back({raster, static_cast<int64_t>(row[r][1])});
      }
      std::sort(seen.begin(), seen.end());
      for (size_t s = 1; s < seen.size(); ++s) {
        if (seen[s].first == seen[s - 1].first) {
          return InternalError("TableModel: the row at raster " + std::to_string(own) +
                               " sees raster " + std::to_string(seen[s].first) + " twice");
        }
      }
      if (conditions != kConditionRows) {
        return InternalError("TableModel: the row at raster " + std::to_string(own) + " sees " +
                             std::to_string(conditions) + " condition rows");
      }
      const int64_t predicts = own + 1;
      std::vector<double> next(vocab, 1.0 / static_cast<double>(vocab));  // past the image
      std::vector<double> null_next = next;
      if (predicts < tokens) {
        next = law_->Given(predicts, seen);
        null_next = unconditional_->Given(predicts, seen);
      }
      for (int64_t t = 0; t < vocab; ++t) {
        logits[i * vocab + t] = std::log(next[t]);
        null_logits[i * vocab + t] = std::log(null_next[t]);
      }
      const bool prefix = static_cast<int64_t>(seen.size()) == own + 1;
      if (prefix) {
        std::vector<int64_t> context;
        for (const Seen& s : seen) context.push_back(s.second);
        const std::vector<float> h = Feature(context);
        std::copy(h.begin(), h.end(), hidden.begin() + i * kDim);
      } else {
        hidden[i * kDim + 1] = -1.0f;  // not a prefix: no feature a head could continue
      }
    }
    cache.Advance(n);
    ForwardOutput out;
    torch::Tensor all_hidden = torch::from_blob(hidden.data(), {1, n, kDim}, torch::kFloat32)
                                   .clone()
                                   .expand({batch, n, kDim});
    out.hidden = all_hidden.contiguous();
    if (logits_mode != LogitsMode::kNone) {
      torch::Tensor all = torch::from_blob(logits.data(), {1, n, vocab}, torch::kFloat32).clone();
      if (batch > 1) {
        const torch::Tensor null =
            torch::from_blob(null_logits.data(), {1, n, vocab}, torch::kFloat32).clone();
        all = torch::cat({all, null.expand({batch - 1, n, vocab})});
      }
      out.logits = logits_mode == LogitsMode::kLast ? all.narrow(1, n - 1, 1).contiguous()
                                                    : all.contiguous();
    }
    return out;
  });
}

StatusOr<std::vector<ForwardOutput>> TableModel::ForwardBatch(const std::vector<ForwardCall>& calls,
                                                              PackedGemms /*gemms*/) const {
  std::vector<ForwardOutput> outputs;
  for (const ForwardCall& call : calls) {
    MULO_RETURN_IF_ERROR(CheckForward(*call.cache, call.embeddings, call.positions, call.mask));
  }
  for (const ForwardCall& call : calls) {
    MULO_ASSIGN_OR_RETURN(ForwardOutput out, Forward(*call.cache, call.embeddings, call.positions,
                                                     call.mask, call.logits_mode));
    outputs.push_back(std::move(out));
  }
  return outputs;
}

StatusOr<ForwardOutput> TableModel::ForwardTokens(KvCache& cache, const torch::Tensor& tokens,
                                                  const torch::Tensor& positions,
                                                  LogitsMode logits_mode) const {
  return ForwardTokens(cache, tokens, positions, torch::Tensor(), logits_mode);
}

StatusOr<ForwardOutput> TableModel::ForwardTokens(KvCache& cache, const torch::Tensor& tokens,
                                                  const torch::Tensor& positions,
                                                  const torch::Tensor& mask,
                                                  LogitsMode logits_mode) const {
  MULO_ASSIGN_OR_RETURN(torch::Tensor embeddings, EmbedTokens(tokens));
  return Forward(cache, embeddings, positions, mask, logits_mode);
}

StatusOr<ForwardOutput> TableModel::ForwardDrawnTokens(KvCache& cache, const torch::Tensor& tokens,
                                                       const torch::Tensor& positions,
                                                       LogitsMode logits_mode) const {
  MULO_ASSIGN_OR_RETURN(torch::Tensor embeddings, EmbedDrawnTokens(tokens));
  return Forward(cache, embeddings, positions, torch::Tensor(), logits_mode);
}

torch::Tensor TableModel::HeadLogits(const torch::Tensor& hidden) const {
  const int64_t vocab = head_->vocab(), tokens = head_->tokens();
  const torch::Tensor flat = hidden.to(torch::kFloat32).reshape({-1, kDim}).contiguous();
  const auto h = flat.accessor<float, 2>();
  std::vector<float> logits(flat.size(0) * vocab);
  auto whole = [](double v, double* out) {
    *out = std::round(v);
    return std::abs(v - *out) < 1e-3;
  };
  for (int64_t i = 0; i < flat.size(0); ++i) {
    const double scale = h[i][0];
    TORCH_CHECK(scale > 0.5, "TableModel::HeadLogits: feature ", i, " lost its constant");
    double length = 0;
    TORCH_CHECK(whole(h[i][1] / scale, &length) && length >= 0 && length <= tokens,
                "TableModel::HeadLogits: feature ", i, " has no context length");
    std::vector<int64_t> context(static_cast<size_t>(length));
    for (int64_t k = 0; k + 2 < kTokenSlot; ++k) {
      double slot = 0;
      TORCH_CHECK(whole(h[i][2 + k] / scale, &slot), "TableModel::HeadLogits: feature ", i,
                  " slot ", k, " is not a token");
      if (k < length) {
        TORCH_CHECK(slot >= 1 && slot <= vocab, "TableModel::HeadLogits: bad token in slot ", k);
        context[static_cast<size_t>(length) - 1 - k] = static_cast<int64_t>(slot) - 1;
      } else {
        TORCH_CHECK(slot == 0, "TableModel::HeadLogits: slot ", k, " past the context");
      }
    }
    std::vector<double> next(vocab, 1.0 / static_cast<double>(vocab));
    if (static_cast<int64_t>(length) < tokens) next = head_->Next(context);
    for (int64_t t = 0; t < vocab; ++t) logits[i * vocab + t] = std::log(next[t]);
  }
  std::vector<int64_t> shape(hidden.sizes().begin(), hidden.sizes().end());
  shape.back() = vocab;
  return torch::from_blob(logits.data(), {flat.size(0), vocab}, torch::kFloat32)
      .clone()
      .view(shape);
}

void WriteLinearEagleHead(const std::string& dir, int64_t tokens) {
  namespace fs = std::filesystem;
  constexpr int64_t d = TableModel::kDim, kMultipleOf = 16;
  fs::create_directories(dir);
  std::ofstream(dir + "/config.json")
      << nlohmann::json{{"dim", d}, {"n_head", 1}, {"multiple_of", kMultipleOf}}.dump();
  // fc over concat(token embedding [d], feature [d]): the constant stays, the length grows by
  // the constant, the register shifts by one slot and the token enters the newest slot.
  torch::Tensor fc = torch::zeros({d, 2 * d});
  fc[0][d + 0] = 1;
  fc[1][d + 1] = 1;
  fc[1][d + 0] = 1;
  fc[2][TableModel::kTokenSlot] = 1;
  for (int64_t k = 0; k + 1 < tokens; ++k) fc[3 + k][d + 2 + k] = 1;
  const int64_t hidden = LlamaFfnHiddenDim(d, kMultipleOf, 0.0);
  at::manual_seed(58);
  const std::string b = "layers.0.";
  std::map<std::string, torch::Tensor> tensors = {
      {"fc.weight", fc},
      {"fc.bias", torch::zeros({d})},
      {b + "attention.wqkv.weight", torch::randn({3 * d, d}) * 0.1},
      {b + "attention.wo.weight", torch::zeros({d, d})},  // attention adds nothing
      {b + "feed_forward.w1.weight", torch::randn({hidden, d}) * 0.1},
      {b + "feed_forward.w3.weight", torch::randn({hidden, d}) * 0.1},
      {b + "feed_forward.w2.weight", torch::zeros({d, hidden})},  // nor does the MLP
      {b + "attention_norm.weight", torch::ones({d})},
      {b + "ffn_norm.weight", torch::ones({d})},
  };
  const Status written = WriteSafetensors(dir + "/model.safetensors", tensors);
  TORCH_CHECK(written.ok(), written.ToString());
}

}  // namespace mulo::engine::testing
