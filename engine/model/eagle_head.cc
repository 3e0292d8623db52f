#include "engine/model/eagle_head.h"

#include "engine/core/device_upload.h"
#include "engine/core/torch_guard.h"
#include "engine/model/json_fields.h"

namespace mulo::engine {

StatusOr<std::shared_ptr<const EagleHead>> EagleHead::LoadDirectory(const std::string& dir,
                                                                    const TokenModel& target,
                                                                    const LoadOptions& options) {
  const std::string config_path = dir + "/config.json";
  MULO_ASSIGN_OR_RETURN(nlohmann::json doc, JsonFields::ParseFile(config_path));
  JsonFields f(doc, config_path);
  std::shared_ptr<EagleHead> head(new EagleHead());
  BlockShape& s = head->shape_;
  MULO_ASSIGN_OR_RETURN(s.dim, f.Int("dim", 1, 1 << 16));
  MULO_ASSIGN_OR_RETURN(s.n_head, f.Int("n_head", 1, 1024));
  MULO_ASSIGN_OR_RETURN(int64_t multiple_of, f.Int("multiple_of", 1, 1 << 16, 256));
  MULO_ASSIGN_OR_RETURN(s.norm_eps, f.Number("norm_eps", 0.0, 1.0, 1e-5));
  if (s.dim != target.dim()) {
    return f.Error("dim", "must equal the target's dim " + std::to_string(target.dim()));
  }
  if (s.dim % s.n_head != 0) return f.Error("n_head", "must divide dim");
  s.n_kv_head = s.n_head;
  s.ffn_hidden_dim = LlamaFfnHiddenDim(s.dim, multiple_of, 0.0);
  const std::string weights = dir + "/model.safetensors";
  MULO_ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::Open(weights, options));
  MULO_RETURN_IF_ERROR(GuardTorch(weights, [&]() -> Status {
    MULO_ASSIGN_OR_RETURN(head->fc_weight_, ckpt.Get("fc.weight", {s.dim, 2 * s.dim}));
    MULO_ASSIGN_OR_RETURN(head->fc_bias_, ckpt.Get("fc.bias", {s.dim}));
    MULO_ASSIGN_OR_RETURN(head->block_, Block::Load(ckpt, "layers.0.", s));
    return OkStatus();
  }));
  head->cuda_graphs_ = target.uses_cuda_graphs();
  head->emulate_cuda_graphs_ = options.emulate_cuda_graphs && !options.device.is_cuda();
  return std::shared_ptr<const EagleHead>(std::move(head));
}

StatusOr<std::shared_ptr<PoolGraphs>> EagleHead::CapturePoolGraphs(const KvPool& pool) const {
  if (!cuda_graphs_) return std::shared_ptr<PoolGraphs>();
  PoolGraphs::Layout layout;
  layout.input_widths = {shape_.dim, shape_.dim};
  layout.options = fc_weight_.options();
  return PoolGraphs::Capture(
      pool, layout,
      [this](KvCache& view, const PoolGraphs::Inputs& in) { return ForwardSlots(view, in); },
      emulate_cuda_graphs_);
}

PoolGraphs::Body EagleHead::SlotForward() const {
  return [this](KvCache& view, const PoolGraphs::Inputs& in) { return ForwardSlots(view, in); };
}

std::vector<torch::Tensor> EagleHead::ForwardSlots(KvCache& view,
                                                   const PoolGraphs::Inputs& in) const {
  at::NoGradGuard no_grad;
  const torch::Tensor h =
      torch::linear(torch::cat({in.inputs[0], in.inputs[1]}, -1), fc_weight_, fc_bias_);
  const torch::Tensor mask = Block::PrepareMask(in.mask, h).unsqueeze(1);
  return {block_.Forward(h, torch::Tensor(), mask, &view, 0, in.rows, in.span)};
}

std::optional<StatusOr<std::vector<torch::Tensor>>> EagleHead::ForwardFromPoolGraphs(
    const std::vector<HeadCall>& calls) const {
  PoolGraphs* graphs = calls.empty() ? nullptr : PoolGraphs::Of(*calls[0].cache);
  if (graphs == nullptr) return std::nullopt;
  std::vector<PoolGraphs::Call> graph_calls;
  for (const HeadCall& call : calls) {
    graph_calls.push_back(
        {call.cache, {call.token_embeddings, call.features}, torch::Tensor(), call.mask});
  }
  auto ran = graphs->Run(graph_calls);
  if (ran.ok() && !ran->has_value()) return std::nullopt;
  if (!ran.ok()) return StatusOr<std::vector<torch::Tensor>>(ran.status());
  return GuardTorch("EagleHead::ForwardFromPoolGraphs",
                    [&]() -> StatusOr<std::vector<torch::Tensor>> {
                      std::vector<torch::Tensor> outputs;
                      // The graph's buffers are rewritten by its next replay.
                      for (const auto& own : **ran) outputs.push_back(own[0].clone());
                      return outputs;
                    });
}

KvCache EagleHead::NewCache(int64_t batch, int64_t capacity) const {
  return KvCache(1, batch, shape_.n_kv_head, shape_.head_dim(), capacity, fc_weight_.options());
}

Status EagleHead::CheckForward(const HeadCall& call) const {
  const torch::Tensor &tokens = call.token_embeddings, &features = call.features;
  if (call.cache == nullptr) return InvalidArgumentError("EagleHead::Forward: no cache");
  if (!tokens.defined() || !features.defined() || tokens.dim() != 3 ||
      tokens.sizes() != features.sizes() || features.size(2) != shape_.dim ||
      features.size(0) != call.cache->batch() || features.size(1) < 1) {
    return InvalidArgumentError("EagleHead::Forward: expected two [batch, n, dim] inputs");
  }
  const int64_t n = features.size(1);
  return Block::CheckMask(call.mask, n, call.cache->length() + n);
}

torch::Tensor EagleHead::AttentionMask(const KvCache& cache, int64_t n,
                                       const torch::Tensor& mask) const {
  if (mask.defined() || n == 1) return mask;
  auto causal = torch::ones({n, cache.length() + n}, torch::dtype(torch::kBool));
  causal.narrow(1, cache.length(), n).copy_(torch::ones({n, n}, torch::kBool).tril());
  return Upload(causal, fc_weight_.device());
}

torch::Tensor EagleHead::FcInput(const HeadCall& call) const {
  return torch::cat({call.token_embeddings, call.features}, -1).to(fc_weight_.options());
}

torch::Tensor EagleHead::Fuse(const HeadCall& call) const {
  return torch::linear(FcInput(call), fc_weight_, fc_bias_);
}

StatusOr<torch::Tensor> EagleHead::Forward(KvCache& cache, const torch::Tensor& token_embeddings,
                                           const torch::Tensor& features,
                                           const torch::Tensor& mask) const {
  const HeadCall call{&cache, token_embeddings, features, mask};
  MULO_RETURN_IF_ERROR(CheckForward(call));
  if (auto replayed = ForwardFromPoolGraphs({call})) {
    MULO_RETURN_IF_ERROR(replayed->status());
    return std::move((**replayed)[0]);
  }
  return GuardTorch("EagleHead::Forward", [&]() -> StatusOr<torch::Tensor> {
    at::NoGradGuard no_grad;
    const int64_t n = features.size(1);
    auto h = Fuse(call);
    auto out = block_.Forward(h, torch::Tensor(),
                              Block::PrepareMask(AttentionMask(cache, n, mask), h), &cache, 0);
    cache.Advance(n);
    return out;
  });
}

StatusOr<std::vector<torch::Tensor>> EagleHead::ForwardBatch(const std::vector<HeadCall>& calls,
                                                             PackedGemms gemms) const {
  std::vector<const KvCache*> caches;
  for (const HeadCall& call : calls) {
    MULO_RETURN_IF_ERROR(CheckForward(call));
    caches.push_back(call.cache);
  }
  MULO_RETURN_IF_ERROR(CheckDistinctCaches(caches, "EagleHead::ForwardBatch"));
  if (auto replayed = ForwardFromPoolGraphs(calls)) return *std::move(replayed);
  return GuardTorch("EagleHead::ForwardBatch", [&]() -> StatusOr<std::vector<torch::Tensor>> {
    at::NoGradGuard no_grad;
    std::vector<PackedSequence> sequences;
    std::vector<torch::Tensor> rows;
    for (const HeadCall& call : calls) {
      const int64_t batch = call.features.size(0), n = call.features.size(1);
      sequences.push_back(
          {call.cache, batch, n, torch::Tensor(),
           Block::PrepareMask(AttentionMask(*call.cache, n, call.mask), fc_weight_)});
      // fc is a GEMM too: a lone forward's (per call) or one over every call's rows.
      rows.push_back(gemms == PackedGemms::kPerSequence
                         ? Fuse(call).reshape({batch * n, shape_.dim})
                         : FcInput(call).reshape({batch * n, 2 * shape_.dim}));
    }
    torch::Tensor x = torch::cat(rows);
    if (gemms == PackedGemms::kShared) x = torch::linear(x, fc_weight_, fc_bias_);
    x = block_.ForwardPacked(x, sequences, 0, gemms);
    std::vector<torch::Tensor> outputs;
    int64_t offset = 0;
    for (const PackedSequence& seq : sequences) {
      outputs.push_back(
          x.narrow(0, offset, seq.batch * seq.length).view({seq.batch, seq.length, shape_.dim}));
      offset += seq.batch * seq.length;
      seq.cache->Advance(seq.length);
    }
    return outputs;
  });
}

}  // namespace mulo::engine
