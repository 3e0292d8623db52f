// The text stages' models on this machine: load time, resident memory and forward cost of a
// converted causal language model (Tar's MLLM: engine/model/causal_lm) and of a T5 encoder
// (LlamaGen t2i's: engine/model/t5_encoder). Random ids (a forward's cost does not depend on
// them); the median of --repeats after one warm-up.
//
//   bazel-bin/bench/text_stage_bench --lm=out/replicas/repository/tar-mllm \
//       --t5=out/replicas/repository/flan-t5-xl-encoder --dtype=bfloat16 --threads=2
//
// The language model: seconds per new token at each of --contexts cached tokens (one token,
// batch 1, the decode step of a 729-code image) and for a prefill of --prompt tokens; with
// --windows, seconds per forward of W new tokens with logits at every one (a Jacobi window:
// SJD and its successors on Tar's MLLM stage), and its ratio to the one-token step, which is
// the step compression a Jacobi method must reach to pay off on this machine. The logits here
// cover the whole text vocabulary (217,206 for Tar's MLLM) where the stage computes its 65,536
// image tokens only: the ratio overstates the window's cost on the stage somewhat. The
// encoder: seconds per encode of --caption tokens for batch 1 and 2.
#include <ATen/Parallel.h>
#include <torch/types.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "bench/bench_flags.h"
#include "bench/process_stats.h"
#include "engine/core/cpu_threads.h"
#include "engine/model/causal_lm.h"
#include "engine/model/t5_encoder.h"

namespace mulo::engine {
namespace {

using bench::Clock;
using bench::RssGiB;
using bench::Seconds;

template <typename Fn>
double Median(int repeats, Fn&& fn) {
  fn();  // warm-up
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    const auto start = Clock::now();
    fn();
    times.push_back(Seconds(start));
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// A causal language model (Tar's MLLM): load, prefill, and a decode step (or a window of new
// tokens) after each cached context. False when it does not load.
bool BenchLanguageModel(const std::string& lm_dir, const LoadOptions& options, int repeats,
                        int prompt, const std::vector<int64_t>& context_list,
                        const std::vector<int64_t>& window_list) {
  const double rss_before = RssGiB();
  auto start = Clock::now();
  auto lm = CausalLm::LoadDirectory(lm_dir, options);
  if (!lm.ok()) {
    std::fprintf(stderr, "error: %s\n", lm.status().ToString().c_str());
    return false;
  }
  const double load = Seconds(start);
  const CausalLmConfig& c = (*lm)->config();
  std::printf("language model %s: %s, %lld layers, %lld wide, vocabulary %lld\n", lm_dir.c_str(),
              c.architecture.c_str(), static_cast<long long>(c.n_layer),
              static_cast<long long>(c.dim), static_cast<long long>(c.vocab_size));
  std::printf("  load %.1f s, resident +%.2f GiB\n", load, RssGiB() - rss_before);
  const auto ids = [&](int64_t n) { return torch::randint(c.vocab_size, {1, n}, torch::kInt64); };
  const double prefill = Median(repeats, [&] {
    KvCache cache = (*lm)->NewCache(1, prompt);
    (void)(*lm)->Forward(cache, ids(prompt), /*last_only=*/true);
  });
  std::printf("  prefill of %d tokens: %.3f s\n", prompt, prefill);
  std::printf(
      "  | cached tokens | new tokens | s per forward | / one-token step |\n"
      "  |---:|---:|---:|---:|\n");
  for (int64_t context : context_list) {
    double one = 0.0;
    for (int64_t window : window_list) {
      KvCache cache = (*lm)->NewCache(1, context + window);
      if (context > 0) (void)(*lm)->Forward(cache, ids(context), /*last_only=*/true);
      const double step = Median(repeats, [&] {
        (void)(*lm)->Forward(cache, ids(window), /*last_only=*/window == 1);
        (void)cache.Truncate(context);
      });
      if (window == 1) one = step;
      std::printf("  | %lld | %lld | %.4f | %s |\n", static_cast<long long>(context),
                  static_cast<long long>(window), step,
                  one > 0 ? std::to_string(step / one).substr(0, 4).c_str() : "-");
    }
  }
  return true;
}

// A T5 encoder (LlamaGen t2i's): load, and one caption's encode at batch 1 and 2.
bool BenchT5(const std::string& t5_dir, const LoadOptions& options, int repeats, int caption) {
  const double rss_before = RssGiB();
  auto start = Clock::now();
  auto t5 = T5Encoder::LoadDirectory(t5_dir, options);
  if (!t5.ok()) {
    std::fprintf(stderr, "error: %s\n", t5.status().ToString().c_str());
    return false;
  }
  const double load = Seconds(start);
  const T5EncoderConfig& c = (*t5)->config();
  std::printf("\nT5 encoder %s: %lld blocks, %lld wide\n", t5_dir.c_str(),
              static_cast<long long>(c.num_layers), static_cast<long long>(c.d_model));
  std::printf("  load %.1f s, resident +%.2f GiB\n", load, RssGiB() - rss_before);
  for (int64_t batch : {1, 2}) {
    const torch::Tensor ids = torch::randint(c.vocab_size, {batch, caption}, torch::kInt64);
    const torch::Tensor mask = torch::ones({batch, caption}, torch::kInt64);
    const double encode = Median(repeats, [&] { (void)(*t5)->Encode(ids, mask); });
    std::printf("  encode batch %lld x %d tokens: %.3f s\n", static_cast<long long>(batch), caption,
                encode);
  }
  return true;
}

int Run(int argc, char** argv) {
  std::string lm_dir, t5_dir, dtype = "float32", contexts = "0,128,512,729", windows = "1";
  int threads = 0, repeats = 5, prompt = 48, caption = 120;
  bench::FlagParser flags("text_stage_bench --lm=DIR --t5=DIR [flags]");
  flags.Add("lm", &lm_dir, "a converted causal language model (tools/convert hf-causal-lm)");
  flags.Add("t5", &t5_dir, "a converted T5 encoder (tools/convert hf-t5-encoder)");
  flags.Add("dtype", &dtype, "float32 or bfloat16");
  flags.Add("threads", &threads, "torch intra-op threads (0 = LibTorch's default)");
  flags.Add("repeats", &repeats, "timed repeats per figure (median)");
  flags.Add("contexts", &contexts, "cached tokens before each timed decode step");
  flags.Add("windows", &windows, "new tokens per timed forward, logits at each (1 = decode)");
  flags.Add("prompt", &prompt, "prefill length (Tar's chat prompt is about 30-60 tokens)");
  flags.Add("caption", &caption, "T5 tokens per caption (LlamaGen: 120)");
  if (!flags.Parse(argc, argv)) return 2;
  std::vector<int64_t> context_list, window_list;
  if (!bench::ParseList(contexts, &context_list) || !bench::ParseList(windows, &window_list) ||
      std::any_of(window_list.begin(), window_list.end(), [](int64_t w) { return w < 1; }) ||
      (lm_dir.empty() && t5_dir.empty()) ||
      (dtype != "float32" && dtype != "bfloat16") || repeats < 1 || prompt < 1 || caption < 1) {
    std::fprintf(stderr, "error: give --lm and/or --t5, --dtype float32|bfloat16, --contexts "
                         "as a list, positive --repeats, --prompt, --caption\n");
    return 2;
  }
  if (threads > 0) SetCpuThreads(threads);
  LoadOptions options;
  options.dtype = dtype == "bfloat16" ? torch::kBFloat16 : torch::kFloat32;
  at::NoGradGuard no_grad;
  std::printf("%s, %d torch thread(s), median of %d\n\n", dtype.c_str(), at::get_num_threads(),
              repeats);
  if (!lm_dir.empty() &&
      !BenchLanguageModel(lm_dir, options, repeats, prompt, context_list, window_list)) {
    return 1;
  }
  if (!t5_dir.empty() && !BenchT5(t5_dir, options, repeats, caption)) return 1;
  return 0;
}

}  // namespace
}  // namespace mulo::engine

int main(int argc, char** argv) { return mulo::engine::Run(argc, argv); }
