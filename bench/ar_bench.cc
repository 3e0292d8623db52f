// AR decode figures for one target transformer, the numbers a GPU deployment is judged by:
//   - the cost table: ms per forward that appends 1, 4, 16, 64 or 256 new tokens to a KV cache
//     already holding the condition plus `context` image tokens (the shapes AR, chain, tree and
//     MuLo-SD verification use), launched eagerly and, on a CUDA device, replayed as CUDA
//     graphs (forward_graphs.h), interleaved per repetition;
//   - the AR step against the memory-bandwidth floor: weight bytes / measured copy bandwidth
//     (--bandwidth or --ceilings from tools/gpu/ceilings.py), and the same floor plus the KV
//     rows the step reads;
//   - whole images: seconds per image for AR at temperature 1, eager and graphs alternating.
// A benchmark, not a test: it prints markdown tables (and --json_out for tools).
//
//   bazel run -c opt //bench:ar_bench -- --model_dir=$PWD/tests/data/tar_tiny
//   out/gpu/ar_bench --model_dir=/tmp/tar_lp_512 --device=cuda --dtype=bfloat16
//       --ceilings=out/gpu/ceilings.json --json_out=out/gpu/cost_tar_lp_512.json
//
// It depends on the engine and LibTorch only (no Abseil), so tools/build_engine.sh builds it
// on a GPU machine that has neither Bazel nor the server's libraries.
#include <ATen/Parallel.h>
#include <torch/cuda.h>
#include <torch/types.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "bench/bench_flags.h"
#include "engine/core/cpu_threads.h"
#include "engine/core/op_count.h"
#include "engine/core/status.h"
#include "engine/decode/ar.h"
#include "engine/model/forward_graphs.h"
#include "engine/model/transformer.h"

namespace mulo::engine {
namespace {

struct Flags {
  std::string model_dir = "tests/data/tar_tiny";
  int repeats = 20;
  int images = 5;
  int threads = 0;
  double cfg_scale = 4.0;
  std::string device = "cpu";
  std::string dtype = "float32";
  std::string new_tokens = "1,4,16,64,256";
  std::string requests = "";  // e.g. 1,2,4,8,16: the stacked-requests table
  std::string contexts = "";  // default: 0, N/4, N/2, 3N/4 image tokens
  std::string graphs = "both";
  std::string fused = "off";
  double bandwidth = 0.0;
  std::string ceilings;
  std::string json_out;
};

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

void Sync(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

int WriteJson(const Flags& flags, const nlohmann::json& report) {
  if (!flags.json_out.empty()) {
    std::ofstream out(flags.json_out);
    out << report.dump(1) << "\n";
    std::printf("\nwrote %s\n", flags.json_out.c_str());
  }
  return 0;
}

// One way of running the model: eager launches or CUDA graphs, each with its own loaded copy
// (graphs are a property of the caches a model hands out).
struct Variant {
  std::string name;
  std::shared_ptr<const Transformer> model;
};

int Fail(const Status& status) {
  std::fprintf(stderr, "error: %s\n", status.ToString().c_str());
  return 1;
}

// A cache for the condition rows `embedded` [rows, cls, dim] followed by `context` image
// tokens (the same random ids in every row; a forward's cost does not depend on them).
StatusOr<KvCache> WarmCache(const Transformer& model, const torch::Tensor& embedded,
                            int64_t context, int64_t capacity) {
  const int64_t rows = embedded.size(0);
  KvCache cache = model.NewCache(rows, capacity);
  MULO_RETURN_IF_ERROR(model.Prefill(cache, embedded, LogitsMode::kNone).status());
  if (context > 0) {
    auto ids = torch::randint(model.config().vocab_size, {1, context}, torch::kInt64)
                   .expand({rows, context})
                   .contiguous();
    auto positions = torch::arange(model.TokenPosition(0), model.TokenPosition(context));
    MULO_RETURN_IF_ERROR(model.ForwardTokens(cache, ids, positions, LogitsMode::kNone).status());
  }
  return cache;
}

// Seconds of one causal append of `ids` at `positions` (all logits, as verification reads
// them); the cache is cut back to `warm` rows afterwards.
StatusOr<double> TimeAppend(const Transformer& model, KvCache& cache, const torch::Tensor& ids,
                            const torch::Tensor& positions, int64_t warm,
                            const torch::Device& device) {
  Sync(device);
  const auto start = Clock::now();
  auto out = model.ForwardTokens(cache, ids, positions, LogitsMode::kAll);
  Sync(device);
  const double seconds = Seconds(start);
  MULO_RETURN_IF_ERROR(out.status());
  MULO_RETURN_IF_ERROR(cache.Truncate(warm));
  return seconds;
}

// Several requests' AR steps stacked along the batch axis of one forward, each with its CFG
// pair and the same context (N/2 image tokens): the most that batching across requests
// (continuous batching) can gain on this device, since real requests differ in context and
// method. Eager forwards; the median over --repeats.
int StackedRequestsTable(const Flags& flags, const Transformer& model,
                         const torch::Tensor& embedded, int64_t batch, const torch::Device& device,
                         nlohmann::json* report) {
  std::vector<int64_t> requests;
  if (!bench::ParseList(flags.requests, &requests) ||
      std::find(requests.begin(), requests.end(), 0) != requests.end()) {
    std::fprintf(stderr, "error: --requests: expected a comma list of positive counts\n");
    return 2;
  }
  const TransformerConfig& c = model.config();
  const int64_t ctx = c.num_image_tokens() / 2;
  std::printf("\nStacked requests (one AR step each, context %ld image tokens, eager):\n\n"
              "| requests | batch rows | ms / forward | ms / request step | throughput vs the first |\n"
              "|---:|---:|---:|---:|---:|\n",
              ctx);
  (*report)["stacked"] = nlohmann::json::array();
  double single_ms = 0.0;  // ms per request step at requests[0]
  for (int64_t r : requests) {
    const int64_t rows = r * batch;
    auto cache = WarmCache(model, embedded.repeat({r, 1, 1}), ctx, c.cls_token_num + ctx + 1);
    if (!cache.ok()) return Fail(cache.status());
    const int64_t warm = cache->length();
    auto step = torch::randint(c.vocab_size, {rows, 1}, torch::kInt64);
    auto position = torch::full({1}, model.TokenPosition(ctx), torch::kInt64);
    std::vector<double> times;
    for (int i = 0; i < std::max(1, flags.repeats) + 1; ++i) {  // the first warms up
      auto t = TimeAppend(model, *cache, step, position, warm, device);
      if (!t.ok()) return Fail(t.status());
      if (i > 0) times.push_back(*t);
    }
    const double ms = 1e3 * Median(times);
    if (single_ms == 0.0) single_ms = ms / r;  // per-request step time of the first count
    std::printf("| %ld | %ld | %.3f | %.3f | %.2fx |\n", r, rows, ms, ms / r,
                single_ms / (ms / r));
    (*report)["stacked"].push_back({{"requests", r}, {"ms", ms}});
  }
  return 0;
}

// The model in each graph mode --graphs asks for, and with and without the fused decode ops
// as --fused asks (the first counts the weight bytes); empty after saying why it failed.
std::vector<Variant> LoadVariants(const Flags& flags, const LoadOptions& options,
                                  const std::shared_ptr<std::atomic<int64_t>>& weight_bytes) {
  const bool graphs_possible = CudaGraphsAvailable(options.device);
  std::vector<Variant> variants;
  for (const bool fused : {false, true}) {
    if ((fused && flags.fused == "off") || (!fused && flags.fused == "on")) continue;
    for (const bool graphs : {false, true}) {
      if (graphs && !graphs_possible) continue;
      if ((graphs && flags.graphs == "off") ||
          (!graphs && flags.graphs == "on" && graphs_possible)) {
        continue;
      }
      LoadOptions o = options;
      o.cuda_graphs = graphs;
      o.fused_kernels = fused;
      if (variants.empty()) o.loaded_bytes = weight_bytes;
      auto loaded = Transformer::LoadDirectory(flags.model_dir, o);
      if (!loaded.ok()) {
        Fail(loaded.status());
        return {};
      }
      const std::string name = graphs ? "graphs" : "eager";
      variants.push_back({fused ? name + "_fused" : name, *loaded});
    }
  }
  return variants;
}

// The shapes and the bandwidth the flags ask for.
struct Shapes {
  std::vector<int64_t> new_tokens, contexts;
  double bandwidth = 0;  // bytes / s; 0: no floor table
};

// --new_tokens, --contexts, --bandwidth and --ceilings read; nullopt after naming the flag.
std::optional<Shapes> ParseShapes(const Flags& flags, int64_t n_image) {
  Shapes shapes;
  if (!bench::ParseList(flags.new_tokens, &shapes.new_tokens)) {
    std::fprintf(stderr, "error: --new_tokens: expected a comma list of counts\n");
    return std::nullopt;
  }
  if (flags.contexts.empty()) {
    shapes.contexts = {0, n_image / 4, n_image / 2, 3 * n_image / 4};
  } else if (!bench::ParseList(flags.contexts, &shapes.contexts)) {
    std::fprintf(stderr, "error: --contexts: expected a comma list of image-token counts\n");
    return std::nullopt;
  }
  for (int64_t ctx : shapes.contexts) {
    if (ctx >= n_image - 1) {
      std::fprintf(stderr, "error: --contexts: %ld leaves no free position (%ld image tokens)\n",
                   ctx, n_image);
      return std::nullopt;
    }
  }
  shapes.bandwidth = flags.bandwidth;
  if (!flags.ceilings.empty()) {
    std::ifstream in(flags.ceilings);
    const auto doc = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded() || !doc.contains("copy_bytes_per_s")) {
      std::fprintf(stderr, "error: --ceilings: %s has no copy_bytes_per_s\n",
                   flags.ceilings.c_str());
      return std::nullopt;
    }
    shapes.bandwidth = doc["copy_bytes_per_s"].get<double>();
  }
  return shapes;
}

// What one decode step is made of: the operators of a 1-token append to a warm cache (an eager
// variant, after its warm-up), counted by engine/core/op_count.h (the fused kernels count as
// their launches). On a GPU each kernel is a launch, so this count bounds how close a step can
// come to the bandwidth floor.
int OneTokenOperators(const Variant& variant, const torch::Tensor& embedded, int64_t batch,
                      const torch::Device& device, nlohmann::json& report) {
  const Transformer& model = *variant.model;
  const TransformerConfig& c = model.config();
  auto cache = WarmCache(model, embedded, 0, c.cls_token_num + 8);
  if (!cache.ok()) return Fail(cache.status());
  auto ids = torch::randint(c.vocab_size, {1, 1}, torch::kInt64).expand({batch, 1}).contiguous();
  auto positions = model.TokenPosition(0) + torch::arange(1);
  const int64_t warm = cache->length();
  for (int i = 0; i < 2; ++i) {  // warm-up: allocator, library handles
    auto t = TimeAppend(model, *cache, ids, positions, warm, device);
    if (!t.ok()) return Fail(t.status());
  }
  std::vector<std::string> kernels;
  const OpCounts before = ThreadOpCounts();
  {
    OpCounting counting(&kernels);
    auto t = TimeAppend(model, *cache, ids, positions, warm, device);
    if (!t.ok()) return Fail(t.status());
  }
  const OpCounts after = ThreadOpCounts();
  const int64_t dispatched = after.dispatched - before.dispatched;
  std::map<std::string, int64_t> by_name;
  for (const std::string& k : kernels) ++by_name[k];
  std::printf(
      "operators of one 1-token forward (%s, context 0, batch %ld, %ld layers): "
      "%ld dispatched, %zu kernels = %.1f per layer\n",
      variant.name.c_str(), batch, c.n_layer, dispatched, kernels.size(),
      static_cast<double>(kernels.size()) / c.n_layer);
  std::vector<std::pair<int64_t, std::string>> ranked;
  for (const auto& [name, count] : by_name) ranked.push_back({count, name});
  std::sort(ranked.rbegin(), ranked.rend());
  std::string listing;
  for (const auto& [count, name] : ranked) {
    listing += (listing.empty() ? "" : ", ") + name + " " + std::to_string(count);
  }
  std::printf("  kernels by operator: %s\n\n", listing.c_str());
  const nlohmann::json counts = {{"dispatched", dispatched},
                                 {"kernels", static_cast<int64_t>(kernels.size())},
                                 {"layers", c.n_layer},
                                 {"by_operator", by_name}};
  // The first eager variant's under the old key, every eager variant's by name.
  if (!report.contains("ops_one_token")) report["ops_one_token"] = counts;
  report["ops_one_token_by_variant"][variant.name] = counts;
  return 0;
}

// The cost table: ms per forward and per token for each context and new-token count, every
// variant on its own warm cache. Free positions after the context wrap for long appends, as
// tree drafts reuse positions (a node's position is its depth), which costs the same.
int CostTable(const Flags& flags, const std::vector<Variant>& variants, const Shapes& shapes,
              const torch::Tensor& embedded, int64_t batch, const torch::Device& device,
              nlohmann::json& report) {
  const Transformer& model = *variants[0].model;
  const TransformerConfig& c = model.config();
  const int64_t n_image = c.num_image_tokens();
  const int repeats = std::max(1, flags.repeats);
  const std::vector<int64_t>& new_tokens = shapes.new_tokens;
  const std::vector<int64_t>& contexts = shapes.contexts;
  const int64_t max_new = *std::max_element(new_tokens.begin(), new_tokens.end());
  const int64_t capacity = c.cls_token_num + n_image + max_new;
  const int warmups = ForwardGraphs::kCaptureAfter + 2;  // eager uses, capture, one replay
  std::printf("| context (image tokens) | new tokens |");
  for (const Variant& v : variants) std::printf(" %s ms / forward |", v.name.c_str());
  for (const Variant& v : variants) std::printf(" %s ms / token |", v.name.c_str());
  std::printf("\n|---:|---:|");
  for (size_t i = 0; i < 2 * variants.size(); ++i) std::printf("---:|");
  std::printf("\n");
  for (int64_t ctx : contexts) {
    std::vector<KvCache> caches;
    for (const Variant& v : variants) {
      auto cache = WarmCache(*v.model, embedded, ctx, capacity);
      if (!cache.ok()) return Fail(cache.status());
      caches.push_back(std::move(*cache));
    }
    const int64_t warm = caches[0].length();
    const int64_t free_positions = n_image - 1 - ctx;
    for (int64_t k : new_tokens) {
      auto ids = torch::randint(c.vocab_size, {1, k}, torch::kInt64).expand({batch, k});
      auto positions = model.TokenPosition(ctx) + torch::arange(k) % free_positions;
      std::vector<std::vector<double>> times(variants.size());
      for (int r = 0; r < repeats + warmups; ++r) {
        for (size_t v = 0; v < variants.size(); ++v) {
          auto t = TimeAppend(*variants[v].model, caches[v], ids.contiguous(), positions, warm,
                              device);
          if (!t.ok()) return Fail(t.status());
          if (r >= warmups) times[v].push_back(*t);
        }
      }
      std::printf("| %ld | %ld |", ctx, k);
      nlohmann::json row = {{"context", ctx}, {"new_tokens", k}};
      for (size_t v = 0; v < variants.size(); ++v) {
        const double ms = 1e3 * Median(times[v]);
        std::printf(" %.3f |", ms);
        row[variants[v].name + "_ms"] = ms;
      }
      for (size_t v = 0; v < variants.size(); ++v) {
        std::printf(" %.4f |", 1e3 * Median(times[v]) / k);
      }
      std::printf("\n");
      report["cost"].push_back(row);
    }
  }
  return 0;
}

// The AR step (1 new token) against the memory-bandwidth floor: the weights and the KV rows
// read once, from the cost table's rows.
void FloorTable(const std::vector<Variant>& variants, double bandwidth, int64_t weight_bytes,
                nlohmann::json& report) {
  const TransformerConfig& c = variants[0].model->config();
  const double floor_ms = 1e3 * weight_bytes / bandwidth;
  const int64_t kv_row = report["kv_bytes_per_row"].get<int64_t>();
  std::printf("\nAR step (1 new token) against the memory-bandwidth floor: weights %.1f MB / "
              "%.2f TB/s = %.3f ms\n\n| context | floor + KV rows read ms |",
              weight_bytes / 1e6, bandwidth / 1e12, floor_ms);
  for (const Variant& v : variants) std::printf(" %s ms | %s / floor |", v.name.c_str(),
                                                v.name.c_str());
  std::printf("\n|---:|---:|");
  for (size_t i = 0; i < variants.size(); ++i) std::printf("---:|---:|");
  std::printf("\n");
  report["floor_ms"] = floor_ms;
  report["bandwidth_bytes_per_s"] = bandwidth;
  for (const auto& row : report["cost"]) {
    if (row["new_tokens"].get<int64_t>() != 1) continue;
    const int64_t ctx = row["context"].get<int64_t>();
    const double kv_ms = 1e3 * kv_row * (c.cls_token_num + ctx) / bandwidth;
    std::printf("| %ld | %.3f |", ctx, floor_ms + kv_ms);
    for (const Variant& v : variants) {
      const double ms = row[v.name + "_ms"].get<double>();
      std::printf(" %.3f | %.2fx |", ms, ms / floor_ms);
    }
    std::printf("\n");
  }

}

// Whole images, the variants alternating per image.
int ImageTable(const Flags& flags, const std::vector<Variant>& variants,
               const Condition& condition, nlohmann::json& report) {
  const int64_t n_image = variants[0].model->config().num_image_tokens();
  DecodeRequest request;
  request.condition = condition;
  request.sampling.cfg_scale = flags.cfg_scale;
  NullProgressSink sink;
  CancelToken cancel;
  const int images = flags.images;
  std::vector<double> total(variants.size());
  for (int i = 0; i <= images; ++i) {  // image 0 warms up (allocator, library handles)
    request.sampling.seed = static_cast<uint64_t>(i);
    for (size_t v = 0; v < variants.size(); ++v) {
      ModelSet models;
      models.target = variants[v].model;
      auto result = ArDecoder().Decode(request, models, sink, cancel);
      if (!result.ok()) return Fail(result.status());
      if (i == 0) continue;
      total[v] += result->stats.total_seconds;
    }
  }
  std::printf("\nFull image (ar, temperature 1, %d seeds after one warm-up, %ld tokens):\n\n"
              "| variant | s / image | ms / token | tokens / s |\n"
              "|---|---:|---:|---:|\n",
              images, n_image);
  report["image"] = nlohmann::json::object();
  for (size_t v = 0; v < variants.size(); ++v) {
    const double per_image = total[v] / images;
    // The whole image's time per token: the phase timers do not wait for a GPU, so the
    // forward phase alone would be the host's dispatch time.
    const double token_ms = 1e3 * per_image / n_image;
    std::printf("| %s | %.4f | %.3f | %.1f |\n", variants[v].name.c_str(), per_image, token_ms,
                n_image / per_image);
    report["image"][variants[v].name] = {{"seconds", per_image}, {"token_ms", token_ms}};
  }
  return 0;
}

int Run(const Flags& flags) {
  const torch::Device device(flags.device);
  if (flags.threads > 0) SetCpuThreads(flags.threads);
  LoadOptions options;
  options.device = device;
  if (flags.dtype == "bfloat16") {
    options.dtype = torch::kBFloat16;
  } else if (flags.dtype == "float16") {
    options.dtype = torch::kFloat16;
  } else if (flags.dtype != "float32") {
    std::fprintf(stderr, "error: --dtype: expected float32, bfloat16 or float16, got \"%s\"\n",
                 flags.dtype.c_str());
    return 2;
  }
  if (flags.fused != "both" && flags.fused != "on" && flags.fused != "off") {
    std::fprintf(stderr, "error: --fused: expected both, on or off\n");
    return 2;
  }
  if (flags.graphs != "both" && flags.graphs != "on" && flags.graphs != "off") {
    std::fprintf(stderr, "error: --graphs: expected both, on or off\n");
    return 2;
  }
  auto weight_bytes = std::make_shared<std::atomic<int64_t>>(0);
  const std::vector<Variant> variants = LoadVariants(flags, options, weight_bytes);
  if (variants.empty()) return 1;
  const Transformer& model = *variants[0].model;
  const TransformerConfig& c = model.config();
  const int64_t batch = flags.cfg_scale == 1.0 ? 1 : 2;
  const int64_t n_image = c.num_image_tokens();
  const std::optional<Shapes> shapes = ParseShapes(flags, n_image);
  if (!shapes) return 2;

  Condition condition;
  if (c.condition_mode == ConditionMode::kClassLabel) {
    condition.class_label = 0;
  } else {
    condition.features = torch::randn({c.cls_token_num, c.cond_dim});
  }
  auto embedded = model.EmbedCondition(condition, batch == 2);
  if (!embedded.ok()) return Fail(embedded.status());

  std::printf("AR decode benchmark: %s\n", flags.model_dir.c_str());
  std::printf("model: dim %ld, %ld layers, %ld heads (%ld kv), vocab %ld, grid %ldx%ld, "
              "%ld condition positions, %.1f M weight bytes (%s); batch %ld (CFG %s); %s, "
              "%d threads\n\n",
              c.dim, c.n_layer, c.n_head, c.n_kv_head, c.vocab_size, c.grid_size, c.grid_size,
              c.cls_token_num, weight_bytes->load() / 1e6, flags.dtype.c_str(), batch,
              batch == 2 ? "on" : "off", device.str().c_str(), at::get_num_threads());

  nlohmann::json report;
  report["model_dir"] = flags.model_dir;
  report["device"] = device.str();
  report["dtype"] = flags.dtype;
  report["batch"] = batch;
  report["weight_bytes"] = weight_bytes->load();
  report["cls_token_num"] = c.cls_token_num;
  report["image_tokens"] = n_image;
  report["kv_bytes_per_row"] = 2 * c.n_layer * batch * c.n_kv_head * c.head_dim() *
                               static_cast<int64_t>(c10::elementSize(options.dtype));
  report["cost"] = nlohmann::json::array();
  for (const Variant& variant : variants) {  // the eager ones (a graph's replay hides its kernels)
    if (variant.name.rfind("eager", 0) != 0 && &variant != &variants[0]) continue;
    if (int status = OneTokenOperators(variant, *embedded, batch, device, report); status != 0) {
      return status;
    }
  }
  if (int status = CostTable(flags, variants, *shapes, *embedded, batch, device, report);
      status != 0) {
    return status;
  }
  if (!flags.requests.empty()) {
    const int status = StackedRequestsTable(flags, model, *embedded, batch, device, &report);
    if (status != 0) return status;
  }
  if (shapes->bandwidth > 0) FloorTable(variants, shapes->bandwidth, weight_bytes->load(), report);
  // Whole images (--images=0 skips them: a 512 px image of a full-size model takes minutes on
  // a CPU).
  if (flags.images > 0) {
    if (int status = ImageTable(flags, variants, condition, report); status != 0) return status;
  }
  return WriteJson(flags, report);
}

}  // namespace
}  // namespace mulo::engine

int main(int argc, char** argv) {
  mulo::engine::Flags flags;
  mulo::bench::FlagParser parser("ar_bench: prints AR decode figures for a target transformer");
  parser.Add("model_dir", &flags.model_dir, "directory with config.json + model.safetensors");
  parser.Add("repeats", &flags.repeats, "timed repetitions per forward shape (median reported)");
  parser.Add("images", &flags.images,
             "full images generated per variant (after one warm-up); 0: none");
  parser.Add("threads", &flags.threads, "torch intra-op threads (0 = LibTorch default)");
  parser.Add("cfg_scale", &flags.cfg_scale, "CFG scale (1 = one stream, otherwise batch 2)");
  parser.Add("device", &flags.device, "cpu or cuda");
  parser.Add("dtype", &flags.dtype, "compute dtype of the weights: float32, bfloat16, float16");
  parser.Add("requests", &flags.requests,
             "comma list: also time one AR step of this many requests stacked in one forward");
  parser.Add("new_tokens", &flags.new_tokens, "comma list: tokens appended per timed forward");
  parser.Add("contexts", &flags.contexts,
             "comma list: image tokens already cached (default 0, N/4, N/2, 3N/4)");
  parser.Add("graphs", &flags.graphs,
             "CUDA graphs: both (eager and graphs side by side), on, off; CPU: always eager");
  parser.Add("fused", &flags.fused,
             "the fused decode ops (LoadOptions::fused_kernels): off, on, both (side by side)");
  parser.Add("bandwidth", &flags.bandwidth, "device copy bandwidth in bytes/s for the floor");
  parser.Add("ceilings", &flags.ceilings, "JSON from tools/gpu/ceilings.py (copy_bytes_per_s)");
  parser.Add("json_out", &flags.json_out, "also write the figures as JSON here");
  if (!parser.Parse(argc, argv)) return 2;
  return mulo::engine::Run(flags);
}
