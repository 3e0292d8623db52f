// Strict, shape-checked access to a model's weights in a safetensors file.
//
// Model loaders ask for every tensor they need by its upstream key and expected shape; the
// first mismatch becomes an error naming the file, the key, the expected and the found shape.
// Keys the model does not use (e.g. a VQ checkpoint's encoder) are allowed and listed by
// UnusedKeys() so callers can report them.
#ifndef MULO_ENGINE_MODEL_CHECKPOINT_H_
#define MULO_ENGINE_MODEL_CHECKPOINT_H_

#include <torch/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "engine/core/status.h"
#include "engine/model/safetensors.h"

namespace mulo::engine {

struct LoadOptions {
  torch::ScalarType dtype = torch::kFloat32;  // compute dtype for floating weights
  torch::Device device = torch::kCPU;
  // On a CUDA device, transformers replay repeated forward shapes as CUDA graphs
  // (forward_graphs.h). Ignored on the CPU and in builds without CUDA.
  bool cuda_graphs = true;
  // With cuda_graphs: pad new rows to power-of-two buckets and capture masked forwards too
  // (forward_graphs.h), so that verify forwards whose size changes every step replay. Off: only
  // causal forwards of repeated exact shapes replay (the behaviour before buckets, kept for
  // paired measurements).
  bool cuda_graph_buckets = true;
  // For tests on the CPU: forwards take the CUDA-graph path (forward_graphs.h) with each
  // "replay" running the captured forward eagerly, so that a CPU test checks what a GPU would
  // replay. Never set in a server.
  bool emulate_cuda_graphs = false;
  // Decoder layers run the fused decode ops (engine/kernels/fused_ops.h): on a CUDA build with
  // the kernels, 5 GEMV-centred launches per layer plus attention's combine; elsewhere their
  // references, which on the CPU give the unfused layer's bits (the CPU tests of the path).
  // Off by default until a GPU run measures it (issue 63).
  bool fused_kernels = false;
  // When set, every tensor a Checkpoint hands out adds its size here (bytes resident on
  // `device`), so a model family can report the memory its weights take.
  std::shared_ptr<std::atomic<int64_t>> loaded_bytes;
};

class Checkpoint {
 public:
  static StatusOr<Checkpoint> Open(const std::string& path, const LoadOptions& options);

  // The tensor `key`, which must have exactly `shape`.
  StatusOr<torch::Tensor> Get(const std::string& key, const std::vector<int64_t>& shape);
  // The same for a tensor some layouts have and others lack (e.g. a bias): an undefined
  // tensor when `key` is absent, the shape check when it is present.
  StatusOr<torch::Tensor> GetOptional(const std::string& key, const std::vector<int64_t>& shape);

  std::vector<std::string> UnusedKeys() const;
  const std::string& path() const { return file_.path(); }

 private:
  Checkpoint(SafetensorsFile file, LoadOptions options)
      : file_(std::move(file)), options_(options) {}

  SafetensorsFile file_;
  LoadOptions options_;
  std::set<std::string> used_;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_MODEL_CHECKPOINT_H_
