#include "engine/model/forward_graphs.h"

#include <functional>

#include "engine/core/device_upload.h"
#include "engine/core/op_count.h"
#include "engine/core/torch_guard.h"
#include "engine/model/cuda_graph_capture.h"
#include "engine/model/decoder_only_model.h"

#ifdef MULO_WITH_CUDA
#include <torch/cuda.h>
#endif

namespace mulo::engine {

// Every graph of one cache allocates from one private pool: they replay one at a time on one
// stream, and their outputs stay referenced.
struct ForwardGraphs::Pool {
  GraphMemoryPool memory;
};

struct ForwardGraphs::Entry {
  int uses = 0;
  bool failed = false;
  // Static inputs on the device: `ints` [batch * rows + rows + 1] int64 holds the ids, the
  // positions and the first row (one upload when the ids come from the host); a masked key's
  // mask [rows, span] bool.
  torch::Tensor ints, mask;
  ForwardOutput output;  // written by every replay
  std::unique_ptr<CapturedGraph> graph;
  // Emulated graphs: the captured forward, run again at each replay.
  std::function<void(KvCache&)> emulated;
  bool captured() const { return graph != nullptr || emulated != nullptr; }
};

bool CudaGraphsAvailable(const torch::Device& device) {
#ifdef MULO_WITH_CUDA
  return device.is_cuda() && torch::cuda::is_available();
#else
  (void)device;
  return false;
#endif
}

int64_t ForwardGraphs::RoundUpToSpan(int64_t rows) {
  return std::max<int64_t>(1, (rows + kSpanRows - 1) / kSpanRows) * kSpanRows;
}

int64_t ForwardGraphs::GraphRows(int64_t n, bool buckets) {
  if (!buckets) return n;
  int64_t rows = 1;
  while (rows < n) rows *= 2;
  return rows;
}

GraphInputs PadGraphInputs(const torch::Tensor& tokens, const torch::Tensor& positions,
                           const torch::Tensor& mask, int64_t cache_length, int64_t rows,
                           int64_t span) {
  const int64_t batch = tokens.size(0), n = tokens.size(1), pad = rows - n;
  GraphInputs in;
  in.ids = tokens;
  in.positions = positions;
  if (pad > 0) {
    in.ids = torch::cat({tokens, tokens.narrow(1, n - 1, 1).expand({batch, pad})}, 1);
    in.positions = torch::cat({positions, positions.narrow(0, n - 1, 1).expand({pad})});
  }
  in.first_row = torch::full({1}, cache_length, torch::kInt64);
  if (mask.defined()) {
    in.mask = torch::zeros({rows, span}, mask.options());
    in.mask.narrow(0, 0, n).narrow(1, 0, cache_length + n).copy_(mask);
    if (pad > 0) {
      // A pad row sees the cached prefix and itself: never an empty softmax.
      in.mask.narrow(0, n, pad).narrow(1, 0, cache_length).fill_(true);
      const auto pad_rows = torch::arange(n, rows, torch::dtype(torch::kInt64).device(mask.device()));
      in.mask.index_put_({pad_rows, pad_rows + cache_length}, true);
    }
  }
  return in;
}

ForwardGraphs::ForwardGraphs(bool buckets, bool emulated)
    : buckets_(buckets), emulated_(emulated), pool_(std::make_unique<Pool>()) {}
ForwardGraphs::~ForwardGraphs() = default;

void ForwardGraphs::Clear() {
  entries_.clear();
  pool_ = std::make_unique<Pool>();
}

int64_t ForwardGraphs::captured() const {
  int64_t count = 0;
  for (const auto& [key, entry] : entries_) count += entry->captured();
  return count;
}

StatusOr<std::optional<ForwardOutput>> ForwardGraphs::Run(const DecoderOnlyModel& model,
                                                          KvCache& cache,
                                                          const torch::Tensor& tokens,
                                                          const torch::Tensor& positions,
                                                          const torch::Tensor& mask,
                                                          LogitsMode mode) {
  if (cache.generation() != generation_) {
    Clear();
    generation_ = cache.generation();
  }
  const bool masked = mask.defined();
  if (masked && !buckets_) return std::optional<ForwardOutput>();
  const int64_t n = tokens.size(1), rows = GraphRows(n, buckets_);
  const int64_t span = RoundUpToSpan(cache.length() + rows);
  if (span > cache.capacity()) return std::optional<ForwardOutput>();
  // A padded graph's last row is a pad row, so it keeps every row's logits and the live last
  // one is picked out below.
  const LogitsMode graph_mode = mode == LogitsMode::kLast && rows > n ? LogitsMode::kAll : mode;
  std::unique_ptr<Entry>& entry = entries_[Key(rows, span, graph_mode, masked)];
  if (entry == nullptr) entry = std::make_unique<Entry>();
  if (entry->failed || ++entry->uses <= kCaptureAfter) return std::optional<ForwardOutput>();
  return GuardTorch("ForwardGraphs::Run", [&]() -> StatusOr<std::optional<ForwardOutput>> {
    at::NoGradGuard no_grad;
    const torch::Device device = model.options().device();
    GraphInputs in = PadGraphInputs(tokens, positions, mask, cache.length(), rows, span);
    const int64_t batch = in.ids.size(0), id_count = batch * rows;
    const bool host_ids = in.ids.device().is_cpu();
    const torch::Tensor host_positions = in.positions.to(torch::kCPU);  // built on the host
    const torch::Tensor host_ints =
        host_ids ? torch::cat({in.ids.flatten(), host_positions, in.first_row})
                 : torch::cat({host_positions, in.first_row});
    Entry* e = entry.get();
    const bool capture = !e->captured();
    if (capture) {
      e->ints = torch::zeros({id_count + rows + 1}, torch::dtype(torch::kInt64).device(device));
      if (masked) e->mask = torch::zeros({rows, span}, torch::dtype(torch::kBool).device(device));
    }
    UploadInto(host_ids ? e->ints : e->ints.narrow(0, id_count, rows + 1), host_ints);
    if (!host_ids) e->ints.narrow(0, 0, id_count).copy_(in.ids.flatten());
    if (masked) UploadInto(e->mask, in.mask);
    if (capture) {
      const auto ids = e->ints.narrow(0, 0, id_count).view({batch, rows});
      const auto pos = e->ints.narrow(0, id_count, rows);
      const auto first_row = e->ints.narrow(0, id_count + rows, 1);
      const torch::Tensor graph_mask = e->mask;
      auto body = [e, &model, ids, pos, first_row, span, graph_mask, graph_mode](KvCache& c) {
        e->output = model.ForwardStatic(c, ids, pos, first_row, span, graph_mask, graph_mode);
      };
      if (emulated_) {
        e->emulated = body;
      } else {
        auto graph = CapturedGraph::Capture(device, [&] { body(cache); }, pool_->memory);
        if (!graph.ok()) {
          // Whatever the warm-up wrote lies past the cache length: the eager run rewrites it.
          e->failed = true;
          ++failed_captures_;
          return std::optional<ForwardOutput>();
        }
        e->graph = std::move(*graph);
      }
    }
    {
      GraphReplay replay;  // counted as one launch (op_count.h)
      if (e->emulated) {
        e->emulated(cache);
      } else {
        e->graph->Replay();
      }
    }
    cache.Advance(n);
    ++replays_;
    ForwardOutput out;
    const ForwardOutput& written = entry->output;
    if (graph_mode == LogitsMode::kAll) {
      out.logits = (mode == LogitsMode::kLast ? written.logits.narrow(1, n - 1, 1)
                                              : written.logits.narrow(1, 0, n))
                       .clone();
    } else if (graph_mode == LogitsMode::kLast) {
      out.logits = written.logits.clone();
    }
    out.hidden = written.hidden.narrow(1, 0, n).clone();
    return std::optional<ForwardOutput>(std::move(out));
  });
}

}  // namespace mulo::engine
