#include "engine/model/transformer.h"

#include <cmath>

#include "engine/core/device_upload.h"
#include "engine/core/op_count.h"
#include "engine/core/torch_guard.h"
#include "engine/model/forward_graphs.h"

namespace mulo::engine {
namespace {

using torch::indexing::Slice;

std::string TensorShape(const torch::Tensor& t) {
  return t.defined() ? ShapeToString(t.sizes().vec()) : "undefined";
}

}  // namespace

torch::Tensor Rope2dTable(int64_t grid, int64_t head_dim, double base, int64_t cls_token_num) {
  const int64_t half = head_dim / 2;
  auto exponents = torch::arange(0, half, 2, torch::kFloat32).slice(0, 0, half / 2) /
                   static_cast<double>(half);
  auto freqs = 1.0 / torch::pow(torch::full({}, base, torch::kFloat32), exponents);
  auto t = torch::arange(grid, torch::kFloat32);
  auto f = torch::outer(t, freqs);  // [grid, hd/4]
  auto rows = f.unsqueeze(1).expand({grid, grid, f.size(1)});
  auto cols = f.unsqueeze(0).expand({grid, grid, f.size(1)});
  auto grid_f = torch::cat({rows, cols}, -1);  // [grid, grid, hd/2]
  auto cache = torch::stack({torch::cos(grid_f), torch::sin(grid_f)}, -1).flatten(0, 1);
  return torch::cat({torch::zeros({cls_token_num, half, 2}), cache});
}

StatusOr<std::shared_ptr<const Transformer>> Transformer::Load(const TransformerConfig& config,
                                                               const std::string& weights_path,
                                                               const LoadOptions& options) {
  MULO_ASSIGN_OR_RETURN(Checkpoint checkpoint, Checkpoint::Open(weights_path, options));
  std::shared_ptr<Transformer> model(new Transformer(config));
  model->emulate_cuda_graphs_ = options.emulate_cuda_graphs && !options.device.is_cuda();
  model->cuda_graphs_ = (options.cuda_graphs && CudaGraphsAvailable(options.device)) ||
                        model->emulate_cuda_graphs_;
  model->cuda_graph_buckets_ = options.cuda_graph_buckets;
  MULO_RETURN_IF_ERROR(GuardTorch(weights_path, [&] { return model->LoadWeights(checkpoint); }));
  return std::shared_ptr<const Transformer>(std::move(model));
}

StatusOr<std::shared_ptr<const Transformer>> Transformer::LoadDirectory(
    const std::string& dir, const LoadOptions& options) {
  MULO_ASSIGN_OR_RETURN(TransformerConfig config, LoadTransformerConfig(dir + "/config.json"));
  return Load(config, dir + "/model.safetensors", options);
}

Status Transformer::LoadWeights(Checkpoint& ckpt) {
  const auto& c = config_;
  const int64_t d = c.dim, hd = c.head_dim();
  MULO_ASSIGN_OR_RETURN(tok_embeddings_, ckpt.Get("tok_embeddings.weight", {c.vocab_size, d}));
  if (c.position_mode == PositionMode::kAbsPe) {
    MULO_ASSIGN_OR_RETURN(abs_pe_, ckpt.Get("abs_pe", {1, c.max_positions(), d}));
    abs_pe_ = abs_pe_.squeeze(0);
  } else {
    rope_ = Rope2dTable(c.grid_size, hd, c.rope_base, c.cls_token_num)
                .to(tok_embeddings_.device());
  }
  switch (c.condition_mode) {
    case ConditionMode::kClipCond: {
      MULO_ASSIGN_OR_RETURN(clip_proj_w_, ckpt.Get("clip_proj.weight", {d, c.cond_dim}));
      MULO_ASSIGN_OR_RETURN(clip_proj_b_, ckpt.Get("clip_proj.bias", {d}));
      break;
    }
    case ConditionMode::kClassLabel: {
      MULO_ASSIGN_OR_RETURN(class_table_, ckpt.Get("cls_embedding.embedding_table.weight",
                                                   {c.num_classes + 1, d}));
      break;
    }
    case ConditionMode::kCaption: {
      MULO_ASSIGN_OR_RETURN(cap_fc1_w_, ckpt.Get("cls_embedding.cap_proj.fc1.weight",
                                                 {d, c.cond_dim}));
      // Upstream LlamaGen's caption MLP has no biases (nn.Linear(..., bias=False)); the
      // bundled fixtures were written with them. Either layout loads; an absent bias is none.
      MULO_ASSIGN_OR_RETURN(cap_fc1_b_,
                            ckpt.GetOptional("cls_embedding.cap_proj.fc1.bias", {d}));
      MULO_ASSIGN_OR_RETURN(cap_fc2_w_, ckpt.Get("cls_embedding.cap_proj.fc2.weight", {d, d}));
      MULO_ASSIGN_OR_RETURN(cap_fc2_b_,
                            ckpt.GetOptional("cls_embedding.cap_proj.fc2.bias", {d}));
      MULO_ASSIGN_OR_RETURN(uncond_embedding_, ckpt.Get("cls_embedding.uncond_embedding",
                                                        {c.cls_token_num, c.cond_dim}));
      break;
    }
  }
  const BlockShape shape{c.dim, c.n_head, c.n_kv_head, c.ffn_hidden_dim, c.norm_eps};
  for (int64_t i = 0; i < c.n_layer; ++i) {
    MULO_ASSIGN_OR_RETURN(Block block,
                          Block::Load(ckpt, "layers." + std::to_string(i) + ".", shape));
    layers_.push_back(std::move(block));
  }
  MULO_ASSIGN_OR_RETURN(norm_, ckpt.Get("norm.weight", {d}));
  MULO_ASSIGN_OR_RETURN(output_, ckpt.Get("output.weight", {c.vocab_size, d}));
  return OkStatus();
}

KvCache Transformer::NewCache(int64_t batch, int64_t capacity) const {
  // Graphs read whole span buckets, so their caches hold a whole number of them.
  KvCache cache(config_.n_layer, batch, config_.n_kv_head, config_.head_dim(),
                cuda_graphs_ ? ForwardGraphs::RoundUpToSpan(capacity) : capacity, options());
  if (cuda_graphs_) {
    cache.set_graphs(
        std::make_shared<ForwardGraphs>(cuda_graph_buckets_, emulate_cuda_graphs_));
  }
  return cache;
}

Status CheckCaptionLength(const TransformerConfig& c, int64_t caption_length) {
  if (caption_length == 0) return OkStatus();
  if (c.condition_mode != ConditionMode::kCaption) {
    return InvalidArgumentError("caption_length: only for caption (LlamaGen t2i) models");
  }
  if (caption_length < 0 || caption_length > c.cls_token_num) {
    return InvalidArgumentError("caption_length: " + std::to_string(caption_length) +
                                " is outside [0, " + std::to_string(c.cls_token_num) +
                                "], the model's caption rows");
  }
  return OkStatus();
}

Status CheckClassLabel(const TransformerConfig& c, int64_t class_label) {
  if (c.condition_mode != ConditionMode::kClassLabel) {
    return InvalidArgumentError("class_label: only for class-conditional (LlamaGen c2i) models");
  }
  if (class_label < 0 || class_label >= c.num_classes) {
    return InvalidArgumentError("class_label: " + std::to_string(class_label) +
                                " is outside [0, " + std::to_string(c.num_classes) + ")");
  }
  return OkStatus();
}

StatusOr<torch::Tensor> Transformer::EmbedCondition(const Condition& condition,
                                                    bool with_null) const {
  const auto& c = config_;
  if (c.condition_mode == ConditionMode::kClassLabel) {
    MULO_RETURN_IF_ERROR(CheckClassLabel(c, condition.class_label));
  } else {
    const auto& f = condition.features;
    if (!f.defined() || f.dim() != 2 || f.size(0) != c.cls_token_num ||
        f.size(1) != c.cond_dim || !f.is_floating_point()) {
      return InvalidArgumentError("condition.features: expected float [" +
                                  std::to_string(c.cls_token_num) + ", " +
                                  std::to_string(c.cond_dim) + "], found " + TensorShape(f));
    }
  }
  MULO_RETURN_IF_ERROR(CheckCaptionLength(c, condition.caption_length));
  return GuardTorch("EmbedCondition", [&]() -> StatusOr<torch::Tensor> {
    torch::NoGradGuard no_grad;
    if (c.condition_mode == ConditionMode::kClassLabel) {
      std::vector<int64_t> labels = {condition.class_label};
      if (with_null) labels.push_back(c.num_classes);  // the null class row
      auto ids = torch::tensor(labels, torch::kInt64).to(class_table_.device());
      return class_table_.index_select(0, ids).unsqueeze(1);
    }
    auto features = condition.features.to(options()).unsqueeze(0);
    if (c.condition_mode == ConditionMode::kClipCond) {
      if (with_null) features = torch::cat({features, torch::zeros_like(features)});
      return torch::linear(features, clip_proj_w_, clip_proj_b_);
    }
    if (with_null) features = torch::cat({features, uncond_embedding_.unsqueeze(0)});
    if (condition.caption_length != 0) {
      // Upstream masks the padded (first) positions out of every row's attention in both
      // guidance halves and lets each attend only to itself: nothing downstream ever sees
      // them, so they need not run. Prefill places the rest at their own positions.
      features = features.narrow(1, c.cls_token_num - condition.caption_length,
                                 condition.caption_length);
    }
    auto h = torch::gelu(torch::linear(features, cap_fc1_w_, cap_fc1_b_), "tanh");
    return torch::linear(h, cap_fc2_w_, cap_fc2_b_);
  });
}

Status Transformer::CheckTokenShape(const torch::Tensor& tokens) {
  if (!tokens.defined() || tokens.dim() != 2 || tokens.scalar_type() != torch::kInt64) {
    return InvalidArgumentError("tokens: expected int64 [batch, n], found " +
                                TensorShape(tokens));
  }
  return OkStatus();
}

Status Transformer::CheckTokens(const torch::Tensor& tokens) const {
  MULO_RETURN_IF_ERROR(CheckTokenShape(tokens));
  return GuardTorch("tokens", [&]() -> Status {
    if (tokens.numel() > 0 &&
        (tokens.min().item<int64_t>() < 0 ||
         tokens.max().item<int64_t>() >= config_.vocab_size)) {
      return InvalidArgumentError("tokens: ids must be in [0, " +
                                  std::to_string(config_.vocab_size) + ")");
    }
    return OkStatus();
  });
}

torch::Tensor Transformer::EmbedCheckedTokens(const torch::Tensor& tokens) const {
  // A no-op move for tokens already on the device, so graph captures may call it too.
  return tok_embeddings_.index_select(0, Upload(tokens, tok_embeddings_.device()).flatten())
      .view({tokens.size(0), tokens.size(1), config_.dim});
}

StatusOr<torch::Tensor> Transformer::EmbedTokens(const torch::Tensor& tokens) const {
  MULO_RETURN_IF_ERROR(CheckTokens(tokens));
  return GuardTorch("EmbedTokens", [&]() -> StatusOr<torch::Tensor> {
    torch::NoGradGuard no_grad;
    return EmbedCheckedTokens(tokens);
  });
}

Status Transformer::CheckForward(const KvCache& cache, const torch::Tensor& embeddings,
                                 const torch::Tensor& positions,
                                 const torch::Tensor& mask) const {
  const auto& c = config_;
  if (!embeddings.defined() || embeddings.dim() != 3 || embeddings.size(2) != c.dim ||
      embeddings.size(0) != cache.batch() || embeddings.size(1) < 1) {
    return InvalidArgumentError("embeddings: expected [" + std::to_string(cache.batch()) +
                                ", n >= 1, " + std::to_string(c.dim) + "], found " +
                                TensorShape(embeddings));
  }
  const int64_t n = embeddings.size(1);
  MULO_RETURN_IF_ERROR(CheckPositions(positions, n));
  return Block::CheckMask(mask, n, cache.length() + n);
}

StatusOr<ForwardOutput> Transformer::Forward(KvCache& cache, const torch::Tensor& embeddings,
                                             const torch::Tensor& positions,
                                             const torch::Tensor& mask,
                                             LogitsMode logits_mode) const {
  MULO_RETURN_IF_ERROR(CheckForward(cache, embeddings, positions, mask));
  return GuardTorch("Transformer::Forward", [&]() -> StatusOr<ForwardOutput> {
    return ForwardImpl(cache, embeddings, positions, mask, logits_mode);
  });
}

Transformer::PreparedInput Transformer::Prepare(const KvCache& cache,
                                                const torch::Tensor& embeddings,
                                                const torch::Tensor& positions,
                                                const torch::Tensor& mask) const {
  const auto& c = config_;
  const int64_t n = embeddings.size(1);
  const auto device = tok_embeddings_.device();
  const auto pos = Upload(positions, device);
  PreparedInput in;
  in.x = embeddings.to(options());
  if (c.position_mode == PositionMode::kAbsPe) {
    in.x = in.x + abs_pe_.index_select(0, pos).unsqueeze(0);
  } else {
    in.rope = rope_.index_select(0, pos);
  }
  torch::Tensor attn_mask = Upload(mask, device);
  if (!attn_mask.defined() && n > 1) {
    // Causal: every cached row, plus new rows up to and including the query's own.
    attn_mask = torch::ones({n, cache.length() + n}, torch::dtype(torch::kBool).device(device));
    attn_mask.narrow(1, cache.length(), n).copy_(
        torch::ones({n, n}, torch::dtype(torch::kBool).device(device)).tril());
  }
  in.mask = Block::PrepareMask(attn_mask, in.x);
  return in;
}

StatusOr<ForwardOutput> Transformer::ForwardImpl(KvCache& cache, const torch::Tensor& embeddings,
                                                 const torch::Tensor& positions,
                                                 const torch::Tensor& mask,
                                                 LogitsMode logits_mode) const {
  torch::NoGradGuard no_grad;
  const int64_t n = embeddings.size(1);
  const int64_t ops_before = ThreadOpCounts().dispatched;
  PreparedInput in = Prepare(cache, embeddings, positions, mask);
  ForwardOutput out = RunLayers(cache, in.x, in.rope, in.mask, torch::Tensor(), 0, logits_mode);
  CommitEager(cache, n, ThreadOpCounts().dispatched - ops_before);
  return out;
}

void Transformer::CommitEager(KvCache& cache, int64_t n, int64_t dispatched_ops) const {
  if (cache.trace() != nullptr) {
    cache.trace()->push_back(
        {this, cache.batch(), n, cache.length(), /*graph=*/false, dispatched_ops});
  }
  cache.Advance(n);
}

StatusOr<std::vector<ForwardOutput>> Transformer::ForwardBatch(
    const std::vector<ForwardCall>& calls, PackedGemms gemms) const {
  std::vector<const KvCache*> caches;
  for (size_t i = 0; i < calls.size(); ++i) {
    const ForwardCall& call = calls[i];
    if (call.cache == nullptr) {
      return InvalidArgumentError("ForwardBatch: call " + std::to_string(i) + " has no cache");
    }
    MULO_RETURN_IF_ERROR(
        CheckForward(*call.cache, call.embeddings, call.positions, call.mask));
    caches.push_back(call.cache);
  }
  MULO_RETURN_IF_ERROR(CheckDistinctCaches(caches, "ForwardBatch"));
  return GuardTorch("Transformer::ForwardBatch", [&]() -> StatusOr<std::vector<ForwardOutput>> {
    return ForwardBatchImpl(calls, gemms);
  });
}

std::vector<ForwardOutput> Transformer::ForwardBatchImpl(const std::vector<ForwardCall>& calls,
                                                         PackedGemms gemms) const {
  torch::NoGradGuard no_grad;
  std::vector<PackedSequence> sequences;
  std::vector<torch::Tensor> rows;
  for (const ForwardCall& call : calls) {
    PreparedInput in = Prepare(*call.cache, call.embeddings, call.positions, call.mask);
    sequences.push_back({call.cache, in.x.size(0), in.x.size(1), in.rope, in.mask});
    rows.push_back(in.x.reshape({-1, config_.dim}));
  }
  torch::Tensor x = torch::cat(rows);
  for (int64_t i = 0; i < config_.n_layer; ++i) {
    x = layers_[i].ForwardPacked(x, sequences, i, gemms);
  }
  std::vector<ForwardOutput> outputs(calls.size());
  if (gemms == PackedGemms::kPerSequence) {
    // The head of each call on its own rows: a lone forward's GEMM shapes.
    int64_t offset = 0;
    for (size_t i = 0; i < calls.size(); ++i) {
      const PackedSequence& seq = sequences[i];
      outputs[i] = Head(x.narrow(0, offset, seq.batch * seq.length)
                            .view({seq.batch, seq.length, config_.dim}),
                        calls[i].logits_mode);
      offset += seq.batch * seq.length;
    }
  } else {
    torch::Tensor hidden = RmsNorm(x, norm_, config_.norm_eps);
    // One output-head GEMM over the rows any call wants logits of.
    std::vector<int64_t> logit_rows;
    int64_t offset = 0;
    for (size_t i = 0; i < calls.size(); ++i) {
      const PackedSequence& seq = sequences[i];
      for (int64_t b = 0; b < seq.batch; ++b) {
        const int64_t first = offset + b * seq.length;
        if (calls[i].logits_mode == LogitsMode::kAll) {
          for (int64_t j = 0; j < seq.length; ++j) logit_rows.push_back(first + j);
        } else if (calls[i].logits_mode == LogitsMode::kLast) {
          logit_rows.push_back(first + seq.length - 1);
        }
      }
      offset += seq.batch * seq.length;
    }
    torch::Tensor logits;
    if (!logit_rows.empty()) {
      auto index = Upload(torch::tensor(logit_rows, torch::kInt64), hidden.device());
      logits = torch::linear(hidden.index_select(0, index), output_).to(torch::kFloat32);
    }
    offset = 0;
    int64_t logit_offset = 0;
    for (size_t i = 0; i < calls.size(); ++i) {
      const PackedSequence& seq = sequences[i];
      outputs[i].hidden =
          hidden.narrow(0, offset, seq.batch * seq.length).view({seq.batch, seq.length, -1});
      const LogitsMode mode = calls[i].logits_mode;
      const int64_t per_stream = mode == LogitsMode::kAll    ? seq.length
                                 : mode == LogitsMode::kLast ? 1
                                                             : 0;
      if (per_stream > 0) {
        outputs[i].logits = logits.narrow(0, logit_offset, seq.batch * per_stream)
                                .view({seq.batch, per_stream, -1});
        logit_offset += seq.batch * per_stream;
      }
      offset += seq.batch * seq.length;
    }
  }
  for (size_t i = 0; i < calls.size(); ++i) CommitEager(*calls[i].cache, sequences[i].length);
  return outputs;
}

ForwardOutput Transformer::ForwardStatic(KvCache& cache, const torch::Tensor& tokens,
                                         const torch::Tensor& positions,
                                         const torch::Tensor& first_row, int64_t span,
                                         const torch::Tensor& mask,
                                         LogitsMode logits_mode) const {
  torch::NoGradGuard no_grad;
  const auto& c = config_;
  const int64_t n = tokens.size(1);
  auto x = EmbedCheckedTokens(tokens);
  torch::Tensor rope;
  if (c.position_mode == PositionMode::kAbsPe) {
    x = x + abs_pe_.index_select(0, positions).unsqueeze(0);
  } else {
    rope = rope_.index_select(0, positions);
  }
  const auto long_options = torch::dtype(torch::kInt64).device(tokens.device());
  auto rows = first_row + torch::arange(n, long_options);  // [n]
  // Causal: row i sees cache rows [0, rows[i]]: the cached prefix, earlier new rows and
  // itself; the stale rows past the live length in the span are hidden.
  const torch::Tensor attend =
      mask.defined() ? mask
                     : torch::arange(span, long_options).unsqueeze(0) <= rows.unsqueeze(1);
  return RunLayers(cache, x, rope, Block::PrepareMask(attend, x), rows, span, logits_mode);
}

ForwardOutput Transformer::RunLayers(KvCache& cache, torch::Tensor x, const torch::Tensor& rope,
                                     const torch::Tensor& mask, const torch::Tensor& rows,
                                     int64_t span, LogitsMode logits_mode) const {
  for (int64_t i = 0; i < config_.n_layer; ++i) {
    x = layers_[i].Forward(x, rope, mask, &cache, i, rows, span);
  }
  return Head(x, logits_mode);
}

ForwardOutput Transformer::Head(const torch::Tensor& x, LogitsMode logits_mode) const {
  const int64_t n = x.size(1);
  ForwardOutput out;
  out.hidden = RmsNorm(x, norm_, config_.norm_eps);
  if (logits_mode == LogitsMode::kAll) {
    out.logits = torch::linear(out.hidden, output_).to(torch::kFloat32);
  } else if (logits_mode == LogitsMode::kLast) {
    out.logits = torch::linear(out.hidden.narrow(1, n - 1, 1), output_).to(torch::kFloat32);
  }
  return out;
}

Status Transformer::CheckPositions(const torch::Tensor& positions, int64_t n) const {
  const auto& c = config_;
  if (!positions.defined() || positions.dim() != 1 || positions.size(0) != n ||
      positions.scalar_type() != torch::kInt64) {
    return InvalidArgumentError("positions: expected int64 [" + std::to_string(n) +
                                "], found " + TensorShape(positions));
  }
  return GuardTorch("positions", [&]() -> Status {
    const int64_t table = c.position_mode == PositionMode::kAbsPe
                              ? c.max_positions()
                              : c.cls_token_num + c.num_image_tokens();
    const auto cpu_positions = positions.to(torch::kCPU);
    if (cpu_positions.min().item<int64_t>() < 0 ||
        cpu_positions.max().item<int64_t>() >= table) {
      return OutOfRangeError("positions: must be in [0, " + std::to_string(table) + ")");
    }
    return OkStatus();
  });
}

StatusOr<ForwardOutput> Transformer::ForwardTokens(KvCache& cache, const torch::Tensor& tokens,
                                                   const torch::Tensor& positions,
                                                   LogitsMode logits_mode) const {
  // Checked once here, for the graph and the eager path alike.
  MULO_RETURN_IF_ERROR(CheckTokens(tokens));
  return ForwardRangeCheckedTokens(cache, tokens, positions, torch::Tensor(), logits_mode);
}

StatusOr<ForwardOutput> Transformer::ForwardTokens(KvCache& cache, const torch::Tensor& tokens,
                                                   const torch::Tensor& positions,
                                                   const torch::Tensor& mask,
                                                   LogitsMode logits_mode) const {
  MULO_RETURN_IF_ERROR(CheckTokens(tokens));
  if (tokens.size(1) >= 1) {
    MULO_RETURN_IF_ERROR(Block::CheckMask(mask, tokens.size(1), cache.length() + tokens.size(1)));
  }
  return ForwardRangeCheckedTokens(cache, tokens, positions, mask, logits_mode);
}

StatusOr<ForwardOutput> Transformer::ForwardDrawnTokens(KvCache& cache,
                                                        const torch::Tensor& tokens,
                                                        const torch::Tensor& positions,
                                                        LogitsMode logits_mode) const {
  MULO_RETURN_IF_ERROR(CheckTokenShape(tokens));
  return ForwardRangeCheckedTokens(cache, tokens, positions, torch::Tensor(), logits_mode);
}

StatusOr<torch::Tensor> Transformer::EmbedDrawnTokens(const torch::Tensor& tokens) const {
  MULO_RETURN_IF_ERROR(CheckTokenShape(tokens));
  return GuardTorch("EmbedDrawnTokens", [&]() -> StatusOr<torch::Tensor> {
    torch::NoGradGuard no_grad;
    return EmbedCheckedTokens(tokens);
  });
}

StatusOr<ForwardOutput> Transformer::ForwardRangeCheckedTokens(KvCache& cache,
                                                               const torch::Tensor& tokens,
                                                               const torch::Tensor& positions,
                                                               const torch::Tensor& mask,
                                                               LogitsMode logits_mode) const {
  if (tokens.size(0) != cache.batch() || tokens.size(1) < 1) {
    return InvalidArgumentError("tokens: expected [" + std::to_string(cache.batch()) +
                                ", n >= 1] (the cache's batch), found " + TensorShape(tokens));
  }
  MULO_RETURN_IF_ERROR(CheckPositions(positions, tokens.size(1)));
  if (ForwardGraphs* graphs = cache.graphs(); graphs != nullptr) {
    const int64_t context = cache.length();
    MULO_ASSIGN_OR_RETURN(std::optional<ForwardOutput> replayed,
                          graphs->Run(*this, cache, tokens, positions, mask, logits_mode));
    if (replayed.has_value()) {
      if (cache.trace() != nullptr) {
        cache.trace()->push_back({this, cache.batch(), tokens.size(1), context, /*graph=*/true});
      }
      return *std::move(replayed);
    }
  }
  return GuardTorch("Transformer::ForwardTokens", [&]() -> StatusOr<ForwardOutput> {
    torch::NoGradGuard no_grad;
    return ForwardImpl(cache, EmbedCheckedTokens(tokens), positions, mask, logits_mode);
  });
}

Status Transformer::CheckPrefill(const KvCache& cache,
                                 const torch::Tensor& condition_embeddings) const {
  if (cache.length() != 0) {
    return FailedPreconditionError("Prefill: the cache must be empty, has " +
                                   std::to_string(cache.length()) + " rows");
  }
  const int64_t rows = condition_embeddings.dim() == 3 ? condition_embeddings.size(1) : -1;
  if (rows < 1 || rows > config_.cls_token_num) {
    return InvalidArgumentError("Prefill: expected [batch, 1.." +
                                std::to_string(config_.cls_token_num) + ", dim] condition "
                                "embeddings, found " + TensorShape(condition_embeddings));
  }
  return OkStatus();
}

StatusOr<ForwardOutput> Transformer::Prefill(KvCache& cache,
                                             const torch::Tensor& condition_embeddings,
                                             LogitsMode logits_mode) const {
  MULO_RETURN_IF_ERROR(CheckPrefill(cache, condition_embeddings));
  return Forward(cache, condition_embeddings, ConditionPositions(condition_embeddings.size(1)),
                 torch::Tensor(), logits_mode);
}

torch::Tensor Transformer::ConditionPositions(int64_t rows) const {
  // The last `rows` condition positions (all of them unless a caption was left-padded).
  return torch::arange(config_.cls_token_num - rows, config_.cls_token_num, torch::kInt64);
}

}  // namespace mulo::engine
