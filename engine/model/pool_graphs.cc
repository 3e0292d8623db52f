#include "engine/model/pool_graphs.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <utility>

#include "engine/core/device_upload.h"
#include "engine/core/torch_guard.h"
#include "engine/model/cuda_graph_capture.h"
#include "engine/model/forward_graphs.h"
#include "engine/model/kv_pool.h"

namespace mulo::engine {

struct PoolGraphs::MemoryPool {
  // Every key's graph allocates from one private pool: one worker replays them one at a time
  // on one stream, and their outputs stay referenced by their entries.
  GraphMemoryPool memory;
};

struct PoolGraphs::Entry {
  // Static inputs on the device: `ints` [streams + 2 x streams x rows] int64 holds every
  // stream's slot, then every stream row's position and cache row (one upload); the mask
  // [streams, rows, span] bool (another).
  std::vector<torch::Tensor> inputs;
  torch::Tensor ints, mask;
  std::optional<KvCache> view;  // the pool's slots as the ints' slot column indexes them
  std::vector<torch::Tensor> outputs;  // written by every replay
  std::unique_ptr<ReplayableGraph> graph;
  int64_t bytes = 0;               // static buffers
};

int64_t PoolGraphs::Bucket(int64_t n) {
  int64_t bucket = 1;
  while (bucket < n) bucket *= 2;
  return bucket;
}

PoolGraphs::PoolGraphs(const KvPool& pool, Layout layout, Body body, bool emulated)
    : layout_(std::move(layout)),
      body_(std::move(body)),
      emulated_(emulated),
      pool_(pool),
      memory_pool_(std::make_unique<MemoryPool>()) {}

PoolGraphs::~PoolGraphs() = default;

void PoolGraphs::Counts::Add(const Counts& other) {
  graphs += other.graphs;
  failed_captures += other.failed_captures;
  replays += other.replays;
  calls += other.calls;
  eager_batches += other.eager_batches;
  eager_calls += other.eager_calls;
  capture_seconds += other.capture_seconds;
  memory_bytes += other.memory_bytes;
}

PoolGraphs::Counts PoolGraphs::counts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counts_;
}

StatusOr<std::shared_ptr<PoolGraphs>> PoolGraphs::Capture(const KvPool& pool, Layout layout,
                                                          Body body, bool emulated) {
  if (pool.scratch_slot() < 0) {
    return InvalidArgumentError("PoolGraphs: the pool needs a scratch slot for pad streams");
  }
  std::shared_ptr<PoolGraphs> graphs(
      new PoolGraphs(pool, std::move(layout), std::move(body), emulated));
  const auto start = std::chrono::steady_clock::now();
  const int64_t reserved_before = DeviceReservedBytes(graphs->layout_.options.device());
  const int64_t most_streams = Bucket(pool.slots());
  for (int64_t streams = 1; streams <= most_streams; streams *= 2) {
    for (int64_t rows = 1; rows <= graphs->layout_.max_rows; rows *= 2) {
      if (streams * rows > graphs->layout_.max_total_rows) break;
      for (int64_t span = ForwardGraphs::kSpanRows; span <= pool.slot_rows();
           span += ForwardGraphs::kSpanRows) {
        if (span < rows) continue;  // a stream's new rows lie inside its span
        MULO_RETURN_IF_ERROR(graphs->CaptureKey(Key(streams, rows, span)));
      }
    }
  }
  Counts& counts = graphs->counts_;
  counts.capture_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  counts.memory_bytes += DeviceReservedBytes(graphs->layout_.options.device()) - reserved_before;
  return graphs;
}

PoolGraphs* PoolGraphs::Of(const KvCache& cache) {
  return cache.pool() != nullptr ? cache.pool()->graphs() : nullptr;
}

Status PoolGraphs::CaptureKey(const Key& key) {
  // Plain locals, not a structured binding: C++17 lets no lambda capture one (clang refuses).
  const int64_t streams = std::get<0>(key), rows = std::get<1>(key), span = std::get<2>(key);
  return GuardTorch("PoolGraphs::Capture", [&]() -> Status {
    at::NoGradGuard no_grad;
    const torch::Device device = layout_.options.device();
    const auto long_options = torch::dtype(torch::kInt64).device(device);
    auto entry = std::make_unique<Entry>();
    Entry* e = entry.get();
    for (const int64_t width : layout_.input_widths) {
      e->inputs.push_back(torch::zeros({streams, rows, width}, layout_.options));
    }
    // Until the first call fills them: every stream a pad stream (the scratch slot, each row
    // seeing itself), so the capture's warm-up writes nowhere a request reads.
    e->ints = torch::cat({torch::full({streams}, pool_.scratch_slot(), long_options),
                          torch::zeros({streams * rows}, long_options),
                          torch::arange(rows, long_options).repeat({streams})});
    e->mask = torch::eye(rows, span, torch::dtype(torch::kBool).device(device))
                  .unsqueeze(0)
                  .repeat({streams, 1, 1});
    for (const auto& t : e->inputs) e->bytes += t.numel() * t.element_size();
    e->bytes += e->ints.numel() * e->ints.element_size() + e->mask.numel();
    const int64_t cells = streams * rows;
    e->view.emplace(pool_.SlotIndexedView(e->ints.narrow(0, 0, streams)));
    Inputs in;
    in.inputs = e->inputs;
    in.positions = e->ints.narrow(0, streams, cells).view({streams, rows});
    in.rows = e->ints.narrow(0, streams + cells, cells).view({streams, rows});
    in.mask = e->mask;
    in.span = span;
    auto run = [this, e, in] { e->outputs = body_(*e->view, in); };
    auto graph = ReplayableGraph::Make(device, run, emulated_, memory_pool_->memory);
    if (!graph.ok()) {
      ++counts_.failed_captures;
      return OkStatus();  // this key's batches run eagerly
    }
    e->graph = std::move(*graph);
    counts_.memory_bytes += e->bytes;
    ++counts_.graphs;
    entries_[key] = std::move(entry);
    return OkStatus();
  });
}

StatusOr<std::optional<std::vector<std::vector<torch::Tensor>>>> PoolGraphs::Run(
    const std::vector<Call>& calls) {
  using Result = std::optional<std::vector<std::vector<torch::Tensor>>>;
  int64_t live_streams = 0, most_new = 0, most_rows = 0;
  for (const Call& call : calls) {
    if (call.cache->pool() != &pool_) return Result();
    live_streams += call.cache->batch();
    most_new = std::max<int64_t>(most_new, call.inputs.at(0).size(1));
  }
  const int64_t streams = Bucket(live_streams), rows = Bucket(most_new);
  for (const Call& call : calls) most_rows = std::max(most_rows, call.cache->length() + rows);
  const int64_t span = ForwardGraphs::RoundUpToSpan(most_rows);
  auto it = entries_.find(Key(streams, rows, span));
  if (span > pool_.slot_rows() || it == entries_.end()) {
    std::lock_guard<std::mutex> lock(mu_);
    ++counts_.eager_batches;
    counts_.eager_calls += static_cast<int64_t>(calls.size());
    return Result();
  }
  Entry* e = it->second.get();
  return GuardTorch("PoolGraphs::Run", [&]() -> StatusOr<Result> {
    at::NoGradGuard no_grad;
    // The host side of the inputs, built in plain memory (no operators): slots, positions and
    // cache rows, and the mask; pad streams keep the capture's (scratch slot, itself).
    const int64_t cells = streams * rows;
    std::vector<int64_t> ints(streams + 2 * cells, 0);
    int64_t* const slots = ints.data();
    int64_t* const positions_of = slots + streams;
    int64_t* const rows_of = positions_of + cells;
    std::vector<uint8_t> mask(static_cast<size_t>(cells * span), 0);
    for (int64_t s = 0; s < streams; ++s) {
      slots[s] = pool_.scratch_slot();
      for (int64_t r = 0; r < rows; ++r) {
        rows_of[s * rows + r] = r;
        mask[(s * rows + r) * span + r] = 1;
      }
    }
    int64_t first_stream = 0;
    std::vector<torch::Tensor> device_masks;  // (call index) masks already on the device
    for (const Call& call : calls) {
      const int64_t n = call.inputs[0].size(1), length = call.cache->length();
      // Positions on an accelerator (made there: a tree's depths) are copied there below.
      torch::Tensor positions = call.positions.defined() && call.positions.device().is_cpu()
                                    ? call.positions.contiguous()
                                    : torch::Tensor();
      const int64_t* pos = positions.defined() ? positions.data_ptr<int64_t>() : nullptr;
      torch::Tensor host_mask;
      if (call.mask.defined() && call.mask.device().is_cpu()) host_mask = call.mask.contiguous();
      for (int64_t b = 0; b < call.cache->batch(); ++b) {
        const int64_t s = first_stream + b;
        slots[s] = call.cache->first_slot() + b;
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t cell = s * rows + r;
          positions_of[cell] = pos != nullptr ? pos[std::min(r, n - 1)] : 0;
          rows_of[cell] = length + r;
          uint8_t* row = &mask[cell * span];
          std::memset(row, 0, span);
          if (r >= n) {
            // A pad row: the cached prefix and itself, never an empty softmax.
            std::memset(row, 1, length);
            row[length + r] = 1;
          } else if (!call.mask.defined()) {
            std::memset(row, 1, length + r + 1);  // causal
          } else if (host_mask.defined()) {
            const bool* own = host_mask.data_ptr<bool>() + r * (length + n);
            for (int64_t c = 0; c < length + n; ++c) row[c] = own[c];
          }
        }
      }
      first_stream += call.cache->batch();
    }
    UploadInto(e->ints, torch::from_blob(ints.data(), {streams + 2 * cells}, torch::kInt64));
    UploadInto(e->mask, torch::from_blob(mask.data(), {streams, rows, span}, torch::kBool));
    first_stream = 0;
    for (const Call& call : calls) {
      const int64_t batch = call.cache->batch(), n = call.inputs[0].size(1);
      for (size_t i = 0; i < e->inputs.size(); ++i) {
        e->inputs[i].narrow(0, first_stream, batch).narrow(1, 0, n).copy_(call.inputs[i]);
      }
      if (call.positions.defined() && !call.positions.device().is_cpu()) {
        for (int64_t b = 0; b < batch; ++b) {
          e->ints.narrow(0, streams + (first_stream + b) * rows, n).copy_(call.positions);
        }
      }
      if (call.mask.defined() && !call.mask.device().is_cpu()) {
        const int64_t keys = call.cache->length() + n;
        e->mask.narrow(0, first_stream, batch)
            .narrow(1, 0, n)
            .narrow(2, 0, keys)
            .copy_(call.mask.unsqueeze(0).expand({batch, n, keys}));
      }
      first_stream += batch;
    }
    e->graph->Replay();
    std::vector<std::vector<torch::Tensor>> outputs;
    first_stream = 0;
    for (const Call& call : calls) {
      const int64_t batch = call.cache->batch(), n = call.inputs[0].size(1);
      std::vector<torch::Tensor> own;
      for (const torch::Tensor& out : e->outputs) {
        own.push_back(out.defined() ? out.narrow(0, first_stream, batch).narrow(1, 0, n)
                                    : torch::Tensor());
      }
      outputs.push_back(std::move(own));
      call.cache->Advance(n);
      first_stream += batch;
    }
    std::lock_guard<std::mutex> lock(mu_);
    ++counts_.replays;
    counts_.calls += static_cast<int64_t>(calls.size());
    return Result(std::move(outputs));
  });
}

}  // namespace mulo::engine
