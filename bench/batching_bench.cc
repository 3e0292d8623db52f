// The engine's continuous batching, without the server: `requests` requests of one method
// decoded one after another (batching off) against the same requests stepped `concurrency` at
// a time by one engine loop (on), for each GEMM grouping, the variants taking turns round
// after round so that the machine's drift falls on all alike. Prints a markdown table of
// images/s and mean request latency. Both run on one thread with one intra-op thread; pin it
// to one core (taskset -c 0) for steadier numbers. A benchmark, not a test.
//
//   batching_bench --models=models/synth --method=ar --concurrency=1,4,8,16 --requests=16
//   batching_bench --method=mixed --concurrency=8 --requests=26   (every method in turn)
//   batching_bench --gemm_requests=8   (only the GEMM cost table)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench_flags.h"
#include "bench/family_inputs.h"
#include "engine/decode/engine_loop.h"
#include "engine/decode/generate.h"
#include "engine/decode/method_registry.h"
#include "engine/model/transformer.h"

namespace mulo::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Flags {
  std::string models = "models/synth";
  std::string prompts = "models/synth/heldout_prompts.jsonl";
  std::string method = "ar";
  std::string concurrency = "1,4,8,16";
  std::string gemms = "per_sequence,shared";
  int requests = 16;
  int rounds = 3;
  int gemm_requests = 0;  // > 0: also the GEMM table for batches of this many requests
};

struct Measure {
  double seconds = 0;       // wall time of all requests
  double mean_latency = 0;  // per request, start to finish
  double calls_per_forward = 0;
  std::vector<std::vector<int32_t>> tokens;  // each request's
};

// The share of image tokens `m` decoded equal to `off`'s (the same requests alone) and the
// number of requests whose every token is: per-request GEMMs give 100%, shared GEMMs change
// the last bits of the logits and so, on a knife edge, a token and the rest of its image.
std::string TokensEqual(const Measure& m, const Measure& off) {
  int64_t equal = 0, total = 0, whole = 0;
  for (size_t i = 0; i < m.tokens.size() && i < off.tokens.size(); ++i) {
    int64_t same = 0;
    for (size_t j = 0; j < m.tokens[i].size() && j < off.tokens[i].size(); ++j) {
      same += m.tokens[i][j] == off.tokens[i][j];
    }
    equal += same;
    total += static_cast<int64_t>(off.tokens[i].size());
    whole += same == static_cast<int64_t>(off.tokens[i].size());
  }
  char text[64];
  std::snprintf(text, sizeof(text), "%.1f%%, %ld/%zu", total ? 100.0 * equal / total : 0.0,
                whole, off.tokens.size());
  return text;
}

// Decodes requests [0, n): one after another (loop null: plain decoding), or stepped by
// `loop` on this thread, `concurrency` at a time.
// Request i runs methods[i % methods.size()].
using Methods = std::vector<std::shared_ptr<const engine::DecodingMethod>>;

Measure Decode(const engine::ModelSet& family, const Methods& methods,
               const std::vector<engine::Condition>& conditions, int n, int concurrency,
               engine::EngineLoop* loop) {
  engine::SetCpuThreads(1);
  std::vector<double> latencies(n);
  std::vector<std::vector<int32_t>> tokens(n);
  const auto decode = [&](int i) {
    engine::DecodeRequest request;
    request.condition = conditions[i % conditions.size()];
    request.sampling.cfg_scale = family.default_cfg_scale;
    request.sampling.seed = 1 + i;
    request.loop = loop;
    engine::NullProgressSink sink;
    engine::CancelToken cancel;
    const auto begin = Clock::now();
    auto result = methods[i % methods.size()]->Decode(request, family, sink, cancel);
    if (!result.ok()) {
      std::fprintf(stderr, "error: %s\n", result.status().ToString().c_str());
      std::exit(1);
    }
    latencies[i] = std::chrono::duration<double>(Clock::now() - begin).count();
    tokens[i] = result->tokens;
  };
  const auto start = Clock::now();
  if (loop == nullptr) {
    for (int i = 0; i < n; ++i) decode(i);
  } else {
    std::vector<engine::EngineLoop::Task> tasks;
    for (int i = 0; i < n; ++i) tasks.push_back([&decode, i] { decode(i); });
    engine::EngineLoop::ListSource source(std::move(tasks), concurrency);
    if (!loop->Serve(source).ok()) std::exit(1);
  }
  Measure m;
  m.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  for (double l : latencies) m.mean_latency += l / n;
  m.tokens = std::move(tokens);
  return m;
}

// Why batching gains so little on this CPU, measured: each of the target's weight GEMMs for
// one request's CFG pair (2 rows) against one GEMM carrying `requests` such pairs. If the
// big GEMM costs about `requests` small ones, batching saves none of the GEMM time and
// only the rest of the forward (dispatch, norms, activations) can shrink.
void PrintGemmTable(const engine::TransformerConfig& c, int requests) {
  struct Weight {
    const char* name;
    int64_t in, out;
  };
  const int64_t qkv = (c.n_head + 2 * c.n_kv_head) * c.head_dim();
  const std::vector<Weight> weights = {{"wqkv", c.dim, qkv},
                                       {"wo", c.dim, c.dim},
                                       {"w1, w3", c.dim, c.ffn_hidden_dim},
                                       {"w2", c.ffn_hidden_dim, c.dim},
                                       {"output head", c.dim, c.vocab_size}};
  constexpr int kRepeats = 400;
  const auto time_us = [](const torch::Tensor& x, const torch::Tensor& w) {
    std::vector<double> us;
    for (int r = 0; r < kRepeats; ++r) {
      const auto begin = Clock::now();
      auto y = torch::linear(x, w);
      us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - begin).count());
    }
    std::sort(us.begin(), us.end());
    return us[us.size() / 2];
  };
  std::printf(
      "\nTarget GEMMs, one thread, median of %d: one request's CFG pair (2 rows) "
      "against %d requests' pairs in one GEMM (%d rows)\n\n",
      kRepeats, requests, 2 * requests);
  std::printf(
      "| weight | in x out | 2 rows us | %d rows us | %d x 2 rows us | batched / "
      "separate |\n|---|---|---:|---:|---:|---:|\n",
      2 * requests, requests);
  at::NoGradGuard no_grad;
  for (const Weight& w : weights) {
    auto weight = torch::randn({w.out, w.in}) * 0.02;
    const double small = time_us(torch::randn({2, w.in}), weight);
    const double big = time_us(torch::randn({2 * requests, w.in}), weight);
    std::printf("| %s | %ld x %ld | %.1f | %.1f | %.1f | %.2f |\n", w.name, static_cast<long>(w.in),
                static_cast<long>(w.out), small, big, requests * small, big / (requests * small));
  }
}

// Measures per concurrency level and variant, over rounds ("off" = sequential, unbatched).
using Runs = std::map<int, std::map<std::string, std::vector<Measure>>>;

double MedianOf(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// One row per concurrency level: the unbatched rate and latency, then each variant's, its
// speedup paired per round, its calls per forward and whether its tokens equal the unbatched.
void PrintTable(Runs& runs, const std::vector<int>& levels,
                const std::vector<std::string>& variants, const Flags& flags) {
  const auto median = MedianOf;
  std::printf("method %s, %d requests per run, median of %d rounds, one core\n\n",
              flags.method.c_str(), flags.requests, flags.rounds);
  std::printf("| concurrency | off images/s | off latency s |");
  for (const auto& v : variants)
    std::printf(" %s images/s | x off | latency s | calls/forward | tokens = off |", v.c_str());
  std::printf("\n|---:|---:|---:|");
  for (size_t i = 0; i < variants.size(); ++i) std::printf("---:|---:|---:|---:|---:|");
  std::printf("\n");
  for (int level : levels) {
    std::vector<double> off_rate, off_latency;
    for (const Measure& m : runs[level]["off"]) {
      off_rate.push_back(flags.requests / m.seconds);
      off_latency.push_back(m.mean_latency);
    }
    std::printf("| %d | %.2f | %.3f |", level, median(off_rate), median(off_latency));
    for (const auto& v : variants) {
      std::vector<double> rate, ratio, latency, calls;
      const auto& ms = runs[level][v];
      for (size_t r = 0; r < ms.size(); ++r) {
        rate.push_back(flags.requests / ms[r].seconds);
        ratio.push_back(runs[level]["off"][r].seconds / ms[r].seconds);  // paired per round
        latency.push_back(ms[r].mean_latency);
        calls.push_back(ms[r].calls_per_forward);
      }
      std::printf(" %.2f | %.2f | %.3f | %.1f | %s |", median(rate), median(ratio), median(latency),
                  median(calls), TokensEqual(ms[0], runs[level]["off"][0]).c_str());
    }
    std::printf("\n");
  }
}

// --gemms as a list of the variants in `kinds`; false (with the error printed) for another.
bool ParseVariants(const std::string& gemms,
                   const std::map<std::string, engine::PackedGemms>& kinds,
                   std::vector<std::string>* variants) {
  std::stringstream in(gemms);
  for (std::string item; std::getline(in, item, ',');) {
    if (!kinds.count(item)) {
      std::fprintf(stderr, "error: --gemms: '%s' is not per_sequence or shared\n", item.c_str());
      return false;
    }
    variants->push_back(item);
  }
  return true;
}

int Run(const Flags& flags) {
  auto inputs = LoadFamilyInputs(flags.models, flags.prompts, flags.requests, 1);
  if (!inputs) return 1;
  const engine::ModelSet& family = inputs->family;
  if (flags.gemm_requests > 0) {
    engine::SetCpuThreads(1);
    const auto* target = dynamic_cast<const engine::Transformer*>(family.target.get());
    if (target == nullptr) {
      std::fprintf(stderr, "error: --gemm_requests needs a llamagen target, this family's is %s\n",
                   family.target->architecture().c_str());
      return 1;
    }
    PrintGemmTable(target->config(), flags.gemm_requests);
    return 0;
  }
  // `mixed`: every method the family serves, request by request in turn.
  const std::vector<std::string> names = flags.method == "mixed"
                                             ? engine::AvailableMethods(family)
                                             : std::vector<std::string>{flags.method};
  Methods methods;
  for (const std::string& name : names) {
    methods.push_back(DefaultMethod(name, family));
    if (methods.back() == nullptr) return 2;
  }
  std::vector<engine::Condition> conditions;
  for (const auto& entry : inputs->prompts) {
    auto condition = engine::ConditionFromPrompt(family, entry.prompt);
    if (!condition.ok()) {
      std::fprintf(stderr, "error: %s\n", condition.status().ToString().c_str());
      return 1;
    }
    conditions.push_back(*condition);
  }
  std::map<std::string, engine::PackedGemms> kinds = {
      {"per_sequence", engine::PackedGemms::kPerSequence},
      {"shared", engine::PackedGemms::kShared}};
  std::vector<std::string> variants;
  if (!ParseVariants(flags.gemms, kinds, &variants)) return 2;
  std::vector<int64_t> counts;
  if (!ParseList(flags.concurrency, &counts) ||
      std::find(counts.begin(), counts.end(), 0) != counts.end()) {
    std::fprintf(stderr, "error: --concurrency: expected a comma list of positive counts\n");
    return 2;
  }
  const std::vector<int> levels(counts.begin(), counts.end());
  // Warm-up: one request of each kind.
  Decode(family, methods, conditions, static_cast<int>(methods.size()), 1, nullptr);

  Runs runs;
  for (int round = 1; round <= flags.rounds; ++round) {
    for (int level : levels) {
      runs[level]["off"].push_back(
          Decode(family, methods, conditions, flags.requests, 1, nullptr));
      for (const std::string& variant : variants) {
        // Calls per forward of a model (the batched draws, judgements and reads apart).
        int64_t forwards = 0, calls = 0;
        engine::EngineLoop loop({/*max_rows=*/1 << 20, kinds[variant]},
                                [&](const engine::EngineLoop::BatchEvent& e) {
                                  using Component = engine::EngineLoop::Component;
                                  if (e.component == Component::kSampler ||
                                      e.component == Component::kVerifier ||
                                      e.component == Component::kHostRead) {
                                    return;
                                  }
                                  ++forwards;
                                  calls += e.calls;
                                });
        Measure m = Decode(family, methods, conditions, flags.requests, level, &loop);
        m.calls_per_forward = static_cast<double>(calls) / std::max<int64_t>(1, forwards);
        runs[level][variant].push_back(m);
      }
      std::fprintf(stderr, "round %d, concurrency %d done\n", round, level);
    }
  }
  PrintTable(runs, levels, variants, flags);
  return 0;
}

}  // namespace
}  // namespace mulo::bench

int main(int argc, char** argv) {
  mulo::bench::Flags flags;
  mulo::bench::FlagParser parser(
      "batching_bench: images/s of one method with continuous batching off and on");
  parser.Add("models", &flags.models, "model family directory");
  parser.Add("prompts", &flags.prompts, "held-out prompts (jsonl)");
  parser.Add("method", &flags.method,
             "decoding method, or mixed: every method of the family, one request each in turn");
  parser.Add("concurrency", &flags.concurrency, "comma list of concurrent requests (batched)");
  parser.Add("gemms", &flags.gemms, "comma list of GEMM groupings: per_sequence, shared");
  parser.Add("requests", &flags.requests, "requests per run");
  parser.Add("rounds", &flags.rounds, "paired rounds (median reported)");
  parser.Add("gemm_requests", &flags.gemm_requests,
             "> 0: print only the target's GEMM costs, 2 rows against this many requests' rows");
  if (!parser.Parse(argc, argv)) return 2;
  return mulo::bench::Run(flags);
}
