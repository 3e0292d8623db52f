// A family's target at real scale, whatever its architecture (engine/model/architectures.h):
// load time and resident memory, then seconds per decode step of one image token with
// classifier-free guidance (batch 2) at each of --contexts image tokens already cached, and per
// forward of W tokens (a Jacobi window: sjd and its successors), with its ratio to the one-token
// step. Random condition and ids (a forward's cost does not depend on them); the median of
// --repeats after one warm-up (each timed forward ends in one host read, as a decode step
// does). A benchmark, not a test.
//
// --logits_out=FILE also writes, before timing, the logits of a fixed sequence as a safetensors
// file for tools/gpu/peer_compiled.py to check its own forward against (issue 63: the peer and
// mulo must run the same model): prompt_ids (1..--prompt, the guidance pair as EmbedCondition
// makes it), codes (kCheckedCodes fixed image tokens fed to both rows after the prompt) and
// logits [2, kCheckedCodes, image tokens] (float32; the conditioned row first).
//
//   bazel-bin/bench/token_model_bench --family=out/replicas/repository/janus-pro-1b \
//       --dtype=bfloat16 --threads=2 --contexts=0,288 --windows=1,16
#include <ATen/Parallel.h>
#include <torch/types.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bench/bench_flags.h"
#include "bench/process_stats.h"
#include "engine/core/cpu_threads.h"
#include "engine/model/model_set.h"
#include "engine/model/safetensors.h"

namespace mulo::engine {
namespace {

using bench::Clock;
using bench::RssGiB;
using bench::Seconds;

constexpr int64_t kCheckedCodes = 8;  // image tokens of the --logits_out sequence

// Writes the logits of the prompt, then kCheckedCodes fixed codes, for both guidance rows.
Status WriteCheckLogits(const TokenModel& target, const Condition& condition,
                        const torch::Tensor& embedded, const std::string& path) {
  const int64_t rows = embedded.size(1);
  KvCache cache = target.NewCache(2, target.CacheRows(rows));
  MULO_RETURN_IF_ERROR(target.Prefill(cache, embedded, LogitsMode::kNone).status());
  // Codes spread over the vocabulary, the same in both rows (as a guided decode feeds them).
  const torch::Tensor codes =
      (torch::arange(kCheckedCodes, torch::kInt64) * 7919 + 11) % target.vocab_size();
  const int64_t first = target.TokenPosition(rows, 0);
  MULO_ASSIGN_OR_RETURN(ForwardOutput out,
                        target.ForwardTokens(cache, codes.unsqueeze(0).repeat({2, 1}),
                                             torch::arange(first, first + kCheckedCodes,
                                                           torch::kInt64),
                                             LogitsMode::kAll));
  std::map<std::string, torch::Tensor> tensors = {
      {"prompt_ids", torch::tensor(condition.prompt_ids, torch::kInt64)},
      {"codes", codes},
      {"logits", out.logits.to(torch::kCPU, torch::kFloat32).contiguous()}};
  // Feature rows are drawn at random: the peer needs them to check the conditioned row too.
  if (condition.features.defined()) {
    tensors["features"] = condition.features.to(torch::kCPU, torch::kFloat32).contiguous();
  }
  return WriteSafetensors(path, tensors);
}

// A condition of the target's kind: prompt ids, a class label or feature rows.
Condition RandomCondition(const TokenModel& target, int64_t prompt_tokens) {
  const ConditionShape& shape = target.condition_shape();
  Condition condition;
  if (shape.mode == ConditionMode::kPromptIds) {
    for (int64_t i = 0; i < std::min(prompt_tokens, shape.rows); ++i) {
      condition.prompt_ids.push_back(1 + i);
    }
  } else if (shape.mode == ConditionMode::kClassLabel) {
    condition.class_label = 0;
  } else {
    condition.features = torch::randn({shape.rows, shape.width});
  }
  return condition;
}

// The forward's time per window of new tokens after each cached context (CFG batch 2), and
// its ratio to the one-token step. Returns each context's (cached rows, one-token step); nullopt
// when a forward fails.
std::optional<std::vector<std::pair<int64_t, double>>> PrintStepTable(
    const TokenModel& target, const torch::Tensor& embedded,
    const std::vector<int64_t>& context_list, const std::vector<int64_t>& window_list,
    int repeats) {
  const int64_t tokens = target.num_image_tokens();
  const int64_t rows = embedded.size(1);
  std::printf(
      "| cached image tokens | new tokens | s per forward (CFG batch 2) | x the one-token "
      "step |\n|---:|---:|---:|---:|\n");
  auto ids = [&](int64_t n) { return torch::randint(target.vocab_size(), {2, n}); };
  auto positions = [&](int64_t from, int64_t n) {
    return torch::arange(target.TokenPosition(rows, from), target.TokenPosition(rows, from) + n,
                         torch::kInt64);
  };
  std::vector<std::pair<int64_t, double>> paged_rows;  // cached rows, one-token step
  for (int64_t context : context_list) {
    // One cache per context (graphs are captured per cache), cut back after every timed forward.
    KvCache cache = target.NewCache(2, target.CacheRows(rows));
    if (!target.Prefill(cache, embedded, LogitsMode::kNone).ok()) return std::nullopt;
    if (context > 0 &&
        !target.ForwardTokens(cache, ids(context), positions(0, context), LogitsMode::kNone).ok()) {
      return std::nullopt;
    }
    const int64_t cached = cache.length();
    double step = 0;
    for (int64_t window : window_list) {
      if (context + window > tokens - 1) continue;  // the last token is never fed
      std::vector<double> times;
      for (int i = 0; i <= repeats; ++i) {
        const auto t0 = Clock::now();
        auto out =
            target.ForwardTokens(cache, ids(window), positions(context, window), LogitsMode::kAll);
        if (!out.ok()) return std::nullopt;
        (void)out->logits.sum().item<float>();    // the host waits for the device, as a step does
        if (i > 0) times.push_back(Seconds(t0));  // the first is the warm-up (and the capture)
        if (!cache.Truncate(cached).ok()) return std::nullopt;
      }
      std::sort(times.begin(), times.end());
      const double median = times[times.size() / 2];
      if (window == 1) step = median;
      std::printf("| %ld | %ld | %.4f | %s |\n", context, window, median,
                  step > 0 ? (std::to_string(median / step).substr(0, 4) + "x").c_str() : "-");
    }
    if (step > 0) paged_rows.push_back({cached, step});
  }
  return paged_rows;
}

// Why the KV-cache pool has fixed slots (docs/design.md): a paged layout, read by LibTorch's
// attention (no paged-attention kernel), must first gather a request's blocks of every layer
// into one tensor each step; a slot is already one (a view). The gather's cost per step, for
// the cache lengths above, against the step itself.
void PrintPagedGatherTable(const TokenModel& target,
                           const std::vector<std::pair<int64_t, double>>& paged_rows, int repeats) {
  std::printf(
      "\n| cached rows | paged gather per step (16-row blocks, all layers, K and V) | "
      "x the one-token step |\n|---:|---:|---:|\n");
  const torch::Tensor probe = target.NewCache(1, 1).Keys(0);  // [1, heads, 0, head dim]
  const int64_t layers = target.NewCache(1, 1).num_layers(), block = 16;
  for (const auto& [cached, step] : paged_rows) {
    const int64_t blocks = 2 * ((cached + block - 1) / block);  // two guidance streams
    const torch::Tensor pool =
        torch::zeros({4 * blocks, probe.size(1), block, probe.size(3)}, probe.options());
    const torch::Tensor table =
        torch::randperm(4 * blocks, torch::dtype(torch::kInt64).device(probe.device()))
            .narrow(0, 0, blocks);
    std::vector<double> times;
    for (int i = 0; i <= repeats; ++i) {
      const auto t0 = Clock::now();
      torch::Tensor sum;
      for (int64_t layer = 0; layer < 2 * layers; ++layer) {
        torch::Tensor gathered = pool.index_select(0, table);
        if (layer == 0) sum = gathered.sum();
      }
      (void)sum.item<float>();
      if (i > 0) times.push_back(Seconds(t0));
    }
    std::sort(times.begin(), times.end());
    const double median = times[times.size() / 2];
    std::printf("| %ld | %.5f s | %.2fx |\n", cached, median, median / step);
  }
}

int Run(int argc, char** argv) {
  std::string family_dir, dtype = "float32", contexts = "0,288", windows = "1,16";
  std::string device = "cpu", graphs = "off", fused = "off", logits_out;
  int threads = 0, repeats = 5, prompt = 40;
  bench::FlagParser flags("token_model_bench --family=DIR [flags]");
  flags.Add("family", &family_dir, "a family directory (family.json)");
  flags.Add("dtype", &dtype, "float32 or bfloat16");
  flags.Add("threads", &threads, "torch intra-op threads (0 = LibTorch's default)");
  flags.Add("repeats", &repeats, "timed repeats per figure (median)");
  flags.Add("contexts", &contexts, "image tokens cached before each timed forward");
  flags.Add("windows", &windows, "new tokens per timed forward (1 = the decode step)");
  flags.Add("prompt", &prompt, "prompt tokens of a target that reads text ids (Janus-Pro)");
  flags.Add("device", &device, "cpu or cuda");
  flags.Add("graphs", &graphs, "on: replay CUDA graphs (cuda only)");
  flags.Add("fused", &fused, "on: the fused decode ops (LoadOptions::fused_kernels)");
  flags.Add("logits_out", &logits_out,
            "also write a fixed sequence's logits here (safetensors) for "
            "tools/gpu/peer_compiled.py --check");
  if (!flags.Parse(argc, argv)) return 2;
  std::vector<int64_t> context_list, window_list;
  if (family_dir.empty() || !bench::ParseList(contexts, &context_list) ||
      !bench::ParseList(windows, &window_list) || window_list.empty() ||
      std::any_of(window_list.begin(), window_list.end(), [](int64_t w) { return w < 1; }) ||
      (dtype != "float32" && dtype != "bfloat16") || repeats < 1 || prompt < 1 ||
      (device != "cpu" && device != "cuda") || (graphs != "on" && graphs != "off") ||
      (fused != "on" && fused != "off")) {
    std::fprintf(stderr,
                 "error: give --family, --dtype float32|bfloat16, --contexts and "
                 "--windows as lists of counts, positive --repeats and --prompt, "
                 "--device cpu|cuda, --graphs on|off, --fused on|off\n");
    return 2;
  }
  if (threads > 0) SetCpuThreads(threads);
  LoadOptions options;
  options.dtype = dtype == "bfloat16" ? torch::kBFloat16 : torch::kFloat32;
  options.device = device == "cuda" ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU);
  options.cuda_graphs = graphs == "on";
  options.fused_kernels = fused == "on";
  at::NoGradGuard no_grad;
  const double rss_before = RssGiB();
  const auto start = Clock::now();
  auto family = LoadModelSet(family_dir, options);
  if (!family.ok()) {
    std::fprintf(stderr, "error: %s\n", family.status().ToString().c_str());
    return 1;
  }
  const double load_s = Seconds(start);
  const TokenModel& target = *family->target;
  std::printf(
      "%s: %s target, grid %ldx%ld, %ld image-token ids; %s on %s (graphs %s, fused "
      "%s), %d torch thread(s), median of %d\n",
      family->name.c_str(), target.architecture().c_str(), target.grid_size(), target.grid_size(),
      target.vocab_size(), dtype.c_str(), device.c_str(), graphs.c_str(), fused.c_str(),
      at::get_num_threads(), repeats);
  std::printf("load %.1f s, resident %.2f GiB (%.2f GiB before loading)\n\n", load_s, RssGiB(),
              rss_before);
  const Condition condition = RandomCondition(target, prompt);
  auto embedded = target.EmbedCondition(condition, /*with_null=*/true);
  if (!embedded.ok()) {
    std::fprintf(stderr, "error: %s\n", embedded.status().ToString().c_str());
    return 1;
  }
  if (!logits_out.empty()) {
    if (Status written = WriteCheckLogits(target, condition, *embedded, logits_out);
        !written.ok()) {
      std::fprintf(stderr, "error: --logits_out: %s\n", written.ToString().c_str());
      return 1;
    }
    std::printf("wrote %s: the logits of %ld prompt ids and %ld codes\n\n", logits_out.c_str(),
                static_cast<long>(condition.prompt_ids.size()), static_cast<long>(kCheckedCodes));
  }
  const auto paged_rows = PrintStepTable(target, *embedded, context_list, window_list, repeats);
  if (!paged_rows.has_value()) return 1;
  PrintPagedGatherTable(target, *paged_rows, repeats);
  return 0;
}

}  // namespace
}  // namespace mulo::engine

int main(int argc, char** argv) { return mulo::engine::Run(argc, argv); }
