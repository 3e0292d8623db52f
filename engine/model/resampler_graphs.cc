#include "engine/model/resampler_graphs.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>

#include "engine/core/torch_guard.h"
#include "engine/model/cuda_graph_capture.h"

namespace mulo::engine {

struct ResamplerGraphs::MemoryPool {
  GraphMemoryPool memory;  // every key's graph allocates from it (one worker replays them)
};

struct ResamplerGraphs::Entry {
  torch::Tensor ids;  // [images, rows * width] int64: the static input, filled by each call
  torch::Tensor out;  // [images, H * W] int64, written by every replay
  std::unique_ptr<ReplayableGraph> graph;
};

ResamplerGraphs::ResamplerGraphs(std::shared_ptr<const Resampler> resampler, int64_t height,
                                 int64_t width, torch::Device device, bool emulated)
    : resampler_(std::move(resampler)),
      height_(height),
      width_(width),
      device_(device),
      emulated_(emulated),
      memory_pool_(std::make_unique<MemoryPool>()) {}

ResamplerGraphs::~ResamplerGraphs() = default;

PoolGraphs::Counts ResamplerGraphs::counts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counts_;
}

StatusOr<std::shared_ptr<ResamplerGraphs>> ResamplerGraphs::Capture(
    std::shared_ptr<const Resampler> resampler, int64_t height, int64_t width, int64_t images,
    torch::Device device, bool emulated) {
  if (resampler == nullptr || height < 1 || width < 1 || images < 1) {
    return InvalidArgumentError("ResamplerGraphs: needs a resampler, a grid and an image");
  }
  std::shared_ptr<ResamplerGraphs> graphs(
      new ResamplerGraphs(std::move(resampler), height, width, device, emulated));
  const auto start = std::chrono::steady_clock::now();
  const int64_t reserved_before = DeviceReservedBytes(device);
  for (int64_t batch = 1; batch <= PoolGraphs::Bucket(images); batch *= 2) {
    for (int64_t rows = 1; rows <= height; ++rows) {
      MULO_RETURN_IF_ERROR(graphs->CaptureKey(Key(batch, rows)));
    }
  }
  PoolGraphs::Counts& counts = graphs->counts_;
  counts.capture_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  counts.memory_bytes += DeviceReservedBytes(device) - reserved_before;
  return graphs;
}

Status ResamplerGraphs::CaptureKey(const Key& key) {
  const int64_t batch = key.first, rows = key.second;
  return GuardTorch("ResamplerGraphs::Capture", [&]() -> Status {
    at::NoGradGuard no_grad;
    auto entry = std::make_unique<Entry>();
    Entry* e = entry.get();
    e->ids = torch::zeros({batch, rows * width_}, torch::dtype(torch::kInt64).device(device_));
    auto run = [this, e, rows] {
      StatusOr<torch::Tensor> out = resampler_->ApplyDrawn(e->ids, rows, width_);
      // The shapes were checked before the capture; a failure leaves `out` undefined.
      if (out.ok()) e->out = std::move(*out);
    };
    auto graph = ReplayableGraph::Make(device_, run, emulated_, memory_pool_->memory);
    if (!graph.ok() || !e->out.defined()) {
      ++counts_.failed_captures;
      return OkStatus();
    }
    e->graph = std::move(*graph);
    counts_.memory_bytes += e->ids.numel() * 8;
    ++counts_.graphs;
    entries_[key] = std::move(entry);
    return OkStatus();
  });
}

bool ResamplerGraphs::Fits(const ResampleCall& call) const {
  return call.drawn && call.w == width_ && call.h >= 1 && call.h <= height_ &&
         call.ids.defined() && call.ids.dim() == 2 && call.ids.size(0) == 1 &&
         call.ids.size(1) == call.h * call.w && call.ids.scalar_type() == torch::kInt64 &&
         entries_.count(Key(1, call.h)) > 0;
}

StatusOr<std::vector<torch::Tensor>> ResamplerGraphs::Run(
    const std::vector<ResampleCall>& calls) const {
  int64_t tallest = 0;
  for (const ResampleCall& call : calls) {
    if (!Fits(call)) {
      return InvalidArgumentError("ResamplerGraphs::Run: a call does not fit the graphs");
    }
    tallest = std::max(tallest, call.h);
  }
  const int64_t batch = PoolGraphs::Bucket(static_cast<int64_t>(calls.size()));
  auto it = entries_.find(Key(batch, tallest));
  if (it == entries_.end()) {
    // A batch whose key failed to capture: each call alone (Fits holds the lone key).
    return RunEachAlone<torch::Tensor>(
        calls, [this](const std::vector<ResampleCall>& one) { return Run(one); });
  }
  Entry* e = it->second.get();
  return GuardTorch("ResamplerGraphs::Run", [&]() -> StatusOr<std::vector<torch::Tensor>> {
    at::NoGradGuard no_grad;
    if (calls.size() == 1 && batch == 1) {
      e->ids.copy_(calls[0].ids);  // a lone image at its own height: one copy, no view
    } else {
      // Pad images (and rows past each image) keep id 0; no real row reads them.
      e->ids.zero_();
      for (size_t i = 0; i < calls.size(); ++i) {
        e->ids.select(0, static_cast<int64_t>(i))
            .narrow(0, 0, calls[i].h * width_)
            .copy_(calls[i].ids.select(0, 0));
      }
    }
    e->graph->Replay();
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++counts_.replays;
      counts_.calls += static_cast<int64_t>(calls.size());
    }
    // A copy: the next replay rewrites the graph's output.
    const torch::Tensor out = e->out.clone();
    std::vector<torch::Tensor> outputs;
    for (size_t i = 0; i < calls.size(); ++i) {
      const int64_t size =
          resampler_->OutputRows(calls[i].h) * resampler_->OutputCols(calls[i].w);
      outputs.push_back(out.narrow(0, static_cast<int64_t>(i), 1).narrow(1, 0, size));
    }
    return outputs;
  });
}

}  // namespace mulo::engine
