#include "engine/model/decoder_only_model.h"

#include "engine/core/device_upload.h"
#include "engine/core/op_count.h"
#include "engine/core/torch_guard.h"
#include "engine/model/forward_graphs.h"
#include "engine/model/row_graphs.h"

namespace mulo::engine {
namespace {

std::string TensorShape(const torch::Tensor& t) {
  return t.defined() ? ShapeToString(t.sizes().vec()) : "undefined";
}

}  // namespace

void DecoderOnlyModel::SetGraphOptions(const LoadOptions& options) {
  emulate_cuda_graphs_ = options.emulate_cuda_graphs && !options.device.is_cuda();
  cuda_graphs_ =
      (options.cuda_graphs && CudaGraphsAvailable(options.device)) || emulate_cuda_graphs_;
  cuda_graph_buckets_ = options.cuda_graph_buckets;
  fused_kernels_ = options.fused_kernels;
}

Status DecoderOnlyModel::LoadLayers(Checkpoint& checkpoint, int64_t n_layer,
                                    const BlockShape& block_shape) {
  shape_ = block_shape;
  for (int64_t i = 0; i < n_layer; ++i) {
    MULO_ASSIGN_OR_RETURN(Block block,
                          Block::Load(checkpoint, "layers." + std::to_string(i) + ".", shape_));
    block.set_fused_kernels(fused_kernels_);
    layers_.push_back(std::move(block));
  }
  return OkStatus();
}

StatusOr<std::shared_ptr<PoolGraphs>> DecoderOnlyModel::CapturePoolGraphs(
    const KvPool& pool) const {
  if (!cuda_graphs_) return std::shared_ptr<PoolGraphs>();
  PoolGraphs::Layout layout;
  layout.input_widths = {shape_.dim};
  layout.options = options();
  return PoolGraphs::Capture(
      pool, layout,
      [this](KvCache& view, const PoolGraphs::Inputs& in) { return ForwardSlots(view, in); },
      emulate_cuda_graphs_);
}

std::optional<RowGraphs::Model> DecoderOnlyModel::StepGraphModel() const {
  if (!cuda_graphs_) return std::nullopt;
  RowGraphs::Model model;
  model.embed = [this](const torch::Tensor& ids) { return EmbedCheckedTokens(ids); };
  model.forward = [this](KvCache& view, const PoolGraphs::Inputs& in) {
    return ForwardSlots(view, in);
  };
  model.dim = shape_.dim;
  model.vocab = vocab_size();
  model.options = options();
  model.emulated = emulate_cuda_graphs_;
  model.fused_draw = fused_kernels_;
  return model;
}

std::vector<torch::Tensor> DecoderOnlyModel::ForwardSlots(KvCache& view,
                                                          const PoolGraphs::Inputs& in) const {
  at::NoGradGuard no_grad;
  torch::Tensor x = in.inputs[0];
  const torch::Tensor rope = ApplyPositions(&x, in.positions);
  // [streams, 1, rows, span]: each stream's own mask, broadcast over the heads.
  const torch::Tensor mask = Block::PrepareMask(in.mask, x).unsqueeze(1);
  ForwardOutput out = Head(RunBlocks(view, x, rope, mask, in.rows, in.span), LogitsMode::kAll);
  return {out.hidden, out.logits};
}

std::optional<StatusOr<std::vector<ForwardOutput>>> DecoderOnlyModel::ForwardFromPoolGraphs(
    const std::vector<ForwardCall>& calls) const {
  PoolGraphs* graphs = calls.empty() ? nullptr : PoolGraphs::Of(*calls[0].cache);
  if (graphs == nullptr) return std::nullopt;
  std::vector<PoolGraphs::Call> graph_calls;
  std::vector<int64_t> contexts;  // cached rows before the forward, for the trace
  for (const ForwardCall& call : calls) {
    graph_calls.push_back({call.cache, {call.embeddings}, call.positions, call.mask});
    contexts.push_back(call.cache->length());
  }
  auto ran = graphs->Run(graph_calls);
  if (ran.ok() && !ran->has_value()) return std::nullopt;
  if (!ran.ok()) return StatusOr<std::vector<ForwardOutput>>(ran.status());
  return GuardTorch("ForwardFromPoolGraphs", [&]() -> StatusOr<std::vector<ForwardOutput>> {
    std::vector<ForwardOutput> outputs;
    for (size_t i = 0; i < calls.size(); ++i) {
      const std::vector<torch::Tensor>& own = (**ran)[i];
      const int64_t n = own[0].size(1);
      ForwardOutput out;
      out.hidden = own[0].clone();  // the graph's buffers are rewritten by its next replay
      if (calls[i].logits_mode == LogitsMode::kAll) out.logits = own[1].clone();
      if (calls[i].logits_mode == LogitsMode::kLast) {
        out.logits = own[1].narrow(1, n - 1, 1).clone();
      }
      KvCache& cache = *calls[i].cache;
      if (cache.trace() != nullptr) {
        cache.trace()->push_back({this, cache.batch(), n, contexts[i], /*graph=*/true});
      }
      outputs.push_back(std::move(out));
    }
    return outputs;
  });
}

KvCache DecoderOnlyModel::NewCache(int64_t batch, int64_t capacity) const {
  // Graphs read whole span buckets, so their caches hold a whole number of them.
  KvCache cache(static_cast<int64_t>(layers_.size()), batch, shape_.n_kv_head, shape_.head_dim(),
                cuda_graphs_ ? ForwardGraphs::RoundUpToSpan(capacity) : capacity, options());
  if (cuda_graphs_) {
    cache.set_graphs(std::make_shared<ForwardGraphs>(cuda_graph_buckets_, emulate_cuda_graphs_));
  }
  return cache;
}

Status DecoderOnlyModel::CheckTokenShape(const torch::Tensor& tokens) {
  if (!tokens.defined() || tokens.dim() != 2 || tokens.scalar_type() != torch::kInt64) {
    return InvalidArgumentError("tokens: expected int64 [batch, n], found " + TensorShape(tokens));
  }
  return OkStatus();
}

Status DecoderOnlyModel::CheckTokens(const torch::Tensor& tokens) const {
  MULO_RETURN_IF_ERROR(CheckTokenShape(tokens));
  return GuardTorch("tokens", [&]() -> Status {
    if (tokens.numel() > 0 &&
        (tokens.min().item<int64_t>() < 0 || tokens.max().item<int64_t>() >= vocab_size())) {
      return InvalidArgumentError("tokens: ids must be in [0, " + std::to_string(vocab_size()) +
                                  ")");
    }
    return OkStatus();
  });
}

torch::Tensor DecoderOnlyModel::EmbedCheckedTokens(const torch::Tensor& tokens) const {
  // A no-op move for tokens already on the device, so graph captures may call it too.
  return tok_embeddings_.index_select(0, Upload(tokens, tok_embeddings_.device()).flatten())
      .view({tokens.size(0), tokens.size(1), shape_.dim});
}

StatusOr<torch::Tensor> DecoderOnlyModel::EmbedTokens(const torch::Tensor& tokens) const {
  MULO_RETURN_IF_ERROR(CheckTokens(tokens));
  return GuardTorch("EmbedTokens", [&]() -> StatusOr<torch::Tensor> {
    at::NoGradGuard no_grad;
    return EmbedCheckedTokens(tokens);
  });
}

Status DecoderOnlyModel::CheckForward(const KvCache& cache, const torch::Tensor& embeddings,
                                      const torch::Tensor& positions,
                                      const torch::Tensor& mask) const {
  const auto& c = shape_;
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

StatusOr<ForwardOutput> DecoderOnlyModel::Forward(KvCache& cache, const torch::Tensor& embeddings,
                                                  const torch::Tensor& positions,
                                                  const torch::Tensor& mask,
                                                  LogitsMode logits_mode) const {
  MULO_RETURN_IF_ERROR(CheckForward(cache, embeddings, positions, mask));
  if (auto replayed = ForwardFromPoolGraphs({{&cache, embeddings, positions, mask, logits_mode}})) {
    MULO_RETURN_IF_ERROR(replayed->status());
    return std::move((**replayed)[0]);
  }
  return GuardTorch("Forward", [&]() -> StatusOr<ForwardOutput> {
    return ForwardImpl(cache, embeddings, positions, mask, logits_mode);
  });
}

DecoderOnlyModel::PreparedInput DecoderOnlyModel::Prepare(const KvCache& cache,
                                                          const torch::Tensor& embeddings,
                                                          const torch::Tensor& positions,
                                                          const torch::Tensor& mask) const {
  const int64_t n = embeddings.size(1);
  const auto device = tok_embeddings_.device();
  PreparedInput in;
  in.x = embeddings.to(options());
  in.rope = ApplyPositions(&in.x, Upload(positions, device));
  const torch::Tensor attn_mask = Upload(mask, device);
  in.mask = attn_mask.defined() ? Block::PrepareMask(attn_mask, in.x) : CausalMask(cache, n, in.x);
  return in;
}

torch::Tensor DecoderOnlyModel::CausalMask(const KvCache& cache, int64_t n,
                                           const torch::Tensor& like) const {
  if (n <= 1) return Block::PrepareMask(torch::Tensor(), like);
  // Every cached row, plus new rows up to and including the query's own.
  const auto device = like.device();
  torch::Tensor attn_mask =
      torch::ones({n, cache.length() + n}, torch::dtype(torch::kBool).device(device));
  attn_mask.narrow(1, cache.length(), n)
      .copy_(torch::ones({n, n}, torch::dtype(torch::kBool).device(device)).tril());
  return Block::PrepareMask(attn_mask, like);
}

torch::Tensor DecoderOnlyModel::ApplyPositions(torch::Tensor* x,
                                               const torch::Tensor& positions) const {
  // positions [n], shared by the streams, or [streams, n] (a batched graph's).
  const bool per_stream = positions.dim() == 2;
  // Flattened only when per stream: a 1-D flatten is one more operator in every eager forward.
  const torch::Tensor index = per_stream ? positions.flatten() : positions;
  if (abs_pe_.defined()) {
    const torch::Tensor rows = abs_pe_.index_select(0, index);
    *x = *x + (per_stream ? rows.view({positions.size(0), positions.size(1), -1})
                          : rows.unsqueeze(0));
    return torch::Tensor();
  }
  const torch::Tensor rows = rope_.index_select(0, index);
  return per_stream ? rows.view({positions.size(0), positions.size(1), rope_.size(1), 2}) : rows;
}

StatusOr<ForwardOutput> DecoderOnlyModel::ForwardImpl(KvCache& cache,
                                                      const torch::Tensor& embeddings,
                                                      const torch::Tensor& positions,
                                                      const torch::Tensor& mask,
                                                      LogitsMode logits_mode) const {
  at::NoGradGuard no_grad;
  const int64_t n = embeddings.size(1);
  const int64_t ops_before = ThreadOpCounts().dispatched;
  PreparedInput in = Prepare(cache, embeddings, positions, mask);
  ForwardOutput out =
      Head(RunBlocks(cache, in.x, in.rope, in.mask, torch::Tensor(), 0), logits_mode);
  CommitEager(cache, n, ThreadOpCounts().dispatched - ops_before);
  return out;
}

void DecoderOnlyModel::CommitEager(KvCache& cache, int64_t n, int64_t dispatched_ops) const {
  if (cache.trace() != nullptr) {
    cache.trace()->push_back(
        {this, cache.batch(), n, cache.length(), /*graph=*/false, dispatched_ops});
  }
  cache.Advance(n);
}

StatusOr<std::vector<ForwardOutput>> DecoderOnlyModel::ForwardBatch(
    const std::vector<ForwardCall>& calls, PackedGemms gemms) const {
  std::vector<const KvCache*> caches;
  for (size_t i = 0; i < calls.size(); ++i) {
    const ForwardCall& call = calls[i];
    if (call.cache == nullptr) {
      return InvalidArgumentError("ForwardBatch: call " + std::to_string(i) + " has no cache");
    }
    MULO_RETURN_IF_ERROR(CheckForward(*call.cache, call.embeddings, call.positions, call.mask));
    caches.push_back(call.cache);
  }
  MULO_RETURN_IF_ERROR(CheckDistinctCaches(caches, "ForwardBatch"));
  // Graphs over a pool are shared GEMMs whatever `gemms` asks (docs/design.md, "Exactness
  // policy"): a GPU batch computes them so in any case.
  if (auto replayed = ForwardFromPoolGraphs(calls)) return *std::move(replayed);
  return GuardTorch("ForwardBatch", [&]() -> StatusOr<std::vector<ForwardOutput>> {
    return ForwardBatchImpl(calls, gemms);
  });
}

std::vector<ForwardOutput> DecoderOnlyModel::ForwardBatchImpl(const std::vector<ForwardCall>& calls,
                                                              PackedGemms gemms) const {
  at::NoGradGuard no_grad;
  std::vector<PackedSequence> sequences;
  std::vector<torch::Tensor> rows;
  for (const ForwardCall& call : calls) {
    PreparedInput in = Prepare(*call.cache, call.embeddings, call.positions, call.mask);
    sequences.push_back({call.cache, in.x.size(0), in.x.size(1), in.rope, in.mask});
    rows.push_back(in.x.reshape({-1, shape_.dim}));
  }
  torch::Tensor x = torch::cat(rows);
  for (size_t i = 0; i < layers_.size(); ++i) {
    x = layers_[i].ForwardPacked(x, sequences, static_cast<int64_t>(i), gemms);
  }
  std::vector<ForwardOutput> outputs(calls.size());
  if (gemms == PackedGemms::kPerSequence) {
    // The head of each call on its own rows: a lone forward's GEMM shapes.
    int64_t offset = 0;
    for (size_t i = 0; i < calls.size(); ++i) {
      const PackedSequence& seq = sequences[i];
      outputs[i] = Head(
          x.narrow(0, offset, seq.batch * seq.length).view({seq.batch, seq.length, shape_.dim}),
          calls[i].logits_mode);
      offset += seq.batch * seq.length;
    }
  } else {
    torch::Tensor hidden = RmsNorm(x, norm_, shape_.norm_eps);
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
      logits = HeadLogits(hidden.index_select(0, index));
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

ForwardOutput DecoderOnlyModel::ForwardStatic(KvCache& cache, const torch::Tensor& tokens,
                                              const torch::Tensor& positions,
                                              const torch::Tensor& first_row, int64_t span,
                                              const torch::Tensor& mask,
                                              LogitsMode logits_mode) const {
  at::NoGradGuard no_grad;
  const int64_t n = tokens.size(1);
  auto x = EmbedCheckedTokens(tokens);
  const torch::Tensor rope = ApplyPositions(&x, positions);
  const auto long_options = torch::dtype(torch::kInt64).device(tokens.device());
  auto rows = first_row + torch::arange(n, long_options);  // [n]
  // Causal: row i sees cache rows [0, rows[i]]: the cached prefix, earlier new rows and
  // itself; the stale rows past the live length in the span are hidden.
  const torch::Tensor attend =
      mask.defined() ? mask : torch::arange(span, long_options).unsqueeze(0) <= rows.unsqueeze(1);
  return Head(RunBlocks(cache, x, rope, Block::PrepareMask(attend, x), rows, span), logits_mode);
}

torch::Tensor DecoderOnlyModel::RunBlocks(KvCache& cache, torch::Tensor x,
                                          const torch::Tensor& rope, const torch::Tensor& mask,
                                          const torch::Tensor& rows, int64_t span) const {
  for (size_t i = 0; i < layers_.size(); ++i) {
    x = layers_[i].Forward(x, rope, mask, &cache, static_cast<int64_t>(i), rows, span);
  }
  return x;
}

ForwardOutput DecoderOnlyModel::Head(const torch::Tensor& x, LogitsMode logits_mode) const {
  const int64_t n = x.size(1);
  ForwardOutput out;
  out.hidden = RmsNorm(x, norm_, shape_.norm_eps);
  if (logits_mode == LogitsMode::kAll) {
    out.logits = HeadLogits(out.hidden);
  } else if (logits_mode == LogitsMode::kLast) {
    out.logits = HeadLogits(out.hidden.narrow(1, n - 1, 1));
  }
  return out;
}

torch::Tensor DecoderOnlyModel::HeadLogits(const torch::Tensor& hidden) const {
  at::NoGradGuard no_grad;
  torch::Tensor x = hidden;
  if (head_hidden_.defined()) x = torch::gelu(torch::linear(x, head_hidden_, head_hidden_bias_));
  return torch::linear(x, output_, output_bias_).to(torch::kFloat32);
}

Status DecoderOnlyModel::CheckPositions(const torch::Tensor& positions, int64_t n) const {
  if (!positions.defined() || positions.dim() != 1 || positions.size(0) != n ||
      positions.scalar_type() != torch::kInt64) {
    return InvalidArgumentError("positions: expected int64 [" + std::to_string(n) + "], found " +
                                TensorShape(positions));
  }
  // Positions the engine made on an accelerator (a tree's depths) are not read back to be
  // checked: that read would drain the device's queue in the middle of a decode step.
  if (!positions.device().is_cpu()) return OkStatus();
  return GuardTorch("positions", [&]() -> Status {
    const int64_t table = position_rows();
    const auto cpu_positions = positions.to(torch::kCPU);
    if (cpu_positions.min().item<int64_t>() < 0 || cpu_positions.max().item<int64_t>() >= table) {
      return OutOfRangeError("positions: must be in [0, " + std::to_string(table) + ")");
    }
    return OkStatus();
  });
}

StatusOr<ForwardOutput> DecoderOnlyModel::ForwardTokens(KvCache& cache, const torch::Tensor& tokens,
                                                        const torch::Tensor& positions,
                                                        LogitsMode logits_mode) const {
  // Checked once here, for the graph and the eager path alike.
  MULO_RETURN_IF_ERROR(CheckTokens(tokens));
  return ForwardRangeCheckedTokens(cache, tokens, positions, torch::Tensor(), logits_mode);
}

StatusOr<ForwardOutput> DecoderOnlyModel::ForwardTokens(KvCache& cache, const torch::Tensor& tokens,
                                                        const torch::Tensor& positions,
                                                        const torch::Tensor& mask,
                                                        LogitsMode logits_mode) const {
  MULO_RETURN_IF_ERROR(CheckTokens(tokens));
  if (tokens.size(1) >= 1) {
    MULO_RETURN_IF_ERROR(Block::CheckMask(mask, tokens.size(1), cache.length() + tokens.size(1)));
  }
  return ForwardRangeCheckedTokens(cache, tokens, positions, mask, logits_mode);
}

StatusOr<ForwardOutput> DecoderOnlyModel::ForwardDrawnTokens(KvCache& cache,
                                                             const torch::Tensor& tokens,
                                                             const torch::Tensor& positions,
                                                             LogitsMode logits_mode) const {
  MULO_RETURN_IF_ERROR(CheckTokenShape(tokens));
  return ForwardRangeCheckedTokens(cache, tokens, positions, torch::Tensor(), logits_mode);
}

StatusOr<torch::Tensor> DecoderOnlyModel::EmbedDrawnTokens(const torch::Tensor& tokens) const {
  MULO_RETURN_IF_ERROR(CheckTokenShape(tokens));
  return GuardTorch("EmbedDrawnTokens", [&]() -> StatusOr<torch::Tensor> {
    at::NoGradGuard no_grad;
    return EmbedCheckedTokens(tokens);
  });
}

StatusOr<ForwardOutput> DecoderOnlyModel::ForwardRangeCheckedTokens(KvCache& cache,
                                                                    const torch::Tensor& tokens,
                                                                    const torch::Tensor& positions,
                                                                    const torch::Tensor& mask,
                                                                    LogitsMode logits_mode) const {
  if (tokens.size(0) != cache.batch() || tokens.size(1) < 1) {
    return InvalidArgumentError("tokens: expected [" + std::to_string(cache.batch()) +
                                ", n >= 1] (the cache's batch), found " + TensorShape(tokens));
  }
  MULO_RETURN_IF_ERROR(CheckPositions(positions, tokens.size(1)));
  if (PoolGraphs::Of(cache) != nullptr) {
    MULO_ASSIGN_OR_RETURN(torch::Tensor embeddings,
                          GuardTorch("ForwardTokens", [&]() -> StatusOr<torch::Tensor> {
                            at::NoGradGuard no_grad;
                            return EmbedCheckedTokens(tokens);
                          }));
    if (auto replayed =
            ForwardFromPoolGraphs({{&cache, embeddings, positions, mask, logits_mode}})) {
      MULO_RETURN_IF_ERROR(replayed->status());
      return std::move((**replayed)[0]);
    }
    return GuardTorch("ForwardTokens", [&]() -> StatusOr<ForwardOutput> {
      return ForwardImpl(cache, embeddings, positions, mask, logits_mode);
    });
  }
  if (ForwardGraphs* graphs = cache.graphs(); graphs != nullptr) {
    const int64_t context = cache.length(), held = graphs->captured();
    MULO_ASSIGN_OR_RETURN(std::optional<ForwardOutput> replayed,
                          graphs->Run(*this, cache, tokens, positions, mask, logits_mode));
    if (replayed.has_value()) {
      if (cache.trace() != nullptr) {
        ForwardEvent event{this, cache.batch(), tokens.size(1), context, /*graph=*/true};
        event.captured = graphs->captured() > held;
        cache.trace()->push_back(event);
      }
      return *std::move(replayed);
    }
  }
  return GuardTorch("ForwardTokens", [&]() -> StatusOr<ForwardOutput> {
    at::NoGradGuard no_grad;
    return ForwardImpl(cache, EmbedCheckedTokens(tokens), positions, mask, logits_mode);
  });
}

Status DecoderOnlyModel::CheckPrefill(const KvCache& cache,
                                      const torch::Tensor& condition_embeddings) const {
  if (cache.length() != 0) {
    return FailedPreconditionError("Prefill: the cache must be empty, has " +
                                   std::to_string(cache.length()) + " rows");
  }
  const int64_t rows = condition_embeddings.dim() == 3 ? condition_embeddings.size(1) : -1;
  const int64_t most = condition_shape().rows;
  if (rows < 1 || rows > most) {
    return InvalidArgumentError("Prefill: expected [batch, 1.." + std::to_string(most) +
                                ", dim] condition embeddings, found " +
                                TensorShape(condition_embeddings));
  }
  return OkStatus();
}

}  // namespace mulo::engine
