// AR decode figures for one model: the cost of a target forward that appends 1, 16 or 64 new
// tokens to a warm KV cache (the shapes AR, chain and tree speculative methods use), and
// whole-image AR throughput. A benchmark, not a test: it prints a markdown table.
//
//   bazel run -c opt //bench:ar_bench -- --model_dir=$PWD/tests/data/tar_tiny
//
// It depends on the engine and LibTorch only (no Abseil), so tools/build_engine.sh builds it
// on a GPU machine that has neither Bazel nor the server's libraries.
#include <torch/cuda.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/bench_flags.h"
#include "engine/core/cpu_threads.h"
#include "engine/decode/ar.h"
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
  return v[v.size() / 2];
}

int Run(const Flags& flags) {
  const torch::Device device(flags.device);
  if (flags.threads > 0) SetCpuThreads(flags.threads);
  LoadOptions options;
  options.device = device;
  auto loaded = Transformer::LoadDirectory(flags.model_dir, options);
  if (!loaded.ok()) {
    std::fprintf(stderr, "error: %s\n", loaded.status().ToString().c_str());
    return 1;
  }
  const Transformer& model = **loaded;
  const TransformerConfig& c = model.config();
  const int64_t batch = flags.cfg_scale == 1.0 ? 1 : 2;
  const int repeats = std::max(1, flags.repeats);

  Condition condition;
  if (c.condition_mode == ConditionMode::kClassLabel) {
    condition.class_label = 0;
  } else {
    condition.features = torch::randn({c.cls_token_num, c.cond_dim});
  }
  auto embedded = model.EmbedCondition(condition, batch == 2);
  if (!embedded.ok()) {
    std::fprintf(stderr, "error: %s\n", embedded.status().ToString().c_str());
    return 1;
  }

  std::printf("AR decode benchmark: %s\n", flags.model_dir.c_str());
  std::printf("model: dim %ld, %ld layers, %ld heads (%ld kv), vocab %ld, grid %ldx%ld, "
              "%ld condition positions; batch %ld (CFG %s); %s, %d threads\n\n",
              c.dim, c.n_layer, c.n_head, c.n_kv_head, c.vocab_size, c.grid_size, c.grid_size,
              c.cls_token_num, batch, batch == 2 ? "on" : "off", device.str().c_str(),
              torch::get_num_threads());

  // Warm cache: the condition plus the first half of the image.
  const int64_t feedable = c.num_image_tokens() - 1;
  const int64_t prefix = feedable / 2;
  KvCache cache = model.NewCache(batch, c.max_positions() + 64);
  if (!model.Prefill(cache, *embedded, LogitsMode::kNone).ok()) return 1;
  auto prefix_tokens = torch::randint(c.vocab_size, {batch, prefix}, torch::kInt64);
  auto prefix_pos = torch::arange(model.TokenPosition(0), model.TokenPosition(prefix));
  if (prefix > 0 &&
      !model.ForwardTokens(cache, prefix_tokens, prefix_pos, LogitsMode::kNone).ok()) {
    return 1;
  }
  const int64_t warm = cache.length();

  std::printf("| new tokens | cache rows before | ms / forward (median of %d) | ms / token |\n",
              repeats);
  std::printf("|---:|---:|---:|---:|\n");
  for (int64_t k : {1, 16, 64}) {
    auto tokens = torch::randint(c.vocab_size, {batch, k}, torch::kInt64);
    // Positions continue after the prefix; beyond the free positions they wrap, as tree
    // drafts reuse positions (a node's position is its depth), which costs the same.
    auto positions = model.TokenPosition(prefix) + torch::arange(k) % (feedable - prefix);
    std::vector<double> times;
    for (int r = 0; r < repeats + 2; ++r) {
      Sync(device);
      const auto start = Clock::now();
      auto out = model.ForwardTokens(cache, tokens, positions, LogitsMode::kAll);
      Sync(device);
      const double t = Seconds(start);
      if (!out.ok()) {
        std::fprintf(stderr, "error: %s\n", out.status().ToString().c_str());
        return 1;
      }
      if (!cache.Truncate(warm).ok()) return 1;
      if (r >= 2) times.push_back(t);  // two warm-up runs
    }
    const double ms = 1e3 * Median(times);
    std::printf("| %ld | %ld | %.3f | %.3f |\n", k, warm, ms, ms / k);
  }

  ModelSet models;
  models.target = *loaded;
  DecodeRequest request;
  request.condition = condition;
  request.sampling.cfg_scale = flags.cfg_scale;
  NullProgressSink sink;
  CancelToken cancel;
  const int images = std::max(1, flags.images);
  double total = 0.0, forward = 0.0;
  for (int i = 0; i < images; ++i) {
    request.sampling.seed = static_cast<uint64_t>(i);
    auto result = ArDecoder().Decode(request, models, sink, cancel);
    if (!result.ok()) {
      std::fprintf(stderr, "error: %s\n", result.status().ToString().c_str());
      return 1;
    }
    total += result->stats.total_seconds;
    forward += result->stats.PhaseSeconds(Phase::kTargetForward) +
               result->stats.PhaseSeconds(Phase::kPrefill);
  }
  const int64_t n = c.num_image_tokens();
  std::printf("\nFull image (ar, temperature 1, %d seeds): %ld tokens in %.3f s mean "
              "(%.1f%% in target forwards) = %.1f tokens/s, %.2f images/s\n",
              images, n, total / images, 100.0 * forward / total, n * images / total,
              images / total);
  return 0;
}

}  // namespace
}  // namespace mulo::engine

int main(int argc, char** argv) {
  mulo::engine::Flags flags;
  mulo::bench::FlagParser parser("ar_bench: prints AR decode figures for a target transformer");
  parser.Add("model_dir", &flags.model_dir, "directory with config.json + model.safetensors");
  parser.Add("repeats", &flags.repeats, "timed repetitions per forward shape (median reported)");
  parser.Add("images", &flags.images, "full images generated for the throughput figure");
  parser.Add("threads", &flags.threads, "torch intra-op threads (0 = LibTorch default)");
  parser.Add("cfg_scale", &flags.cfg_scale, "CFG scale (1 = one stream, otherwise batch 2)");
  parser.Add("device", &flags.device, "cpu or cuda");
  if (!parser.Parse(argc, argv)) return 2;
  return mulo::engine::Run(flags);
}
