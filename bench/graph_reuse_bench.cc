// How many of each method's forwards replay a CUDA graph, with graphs emulated on the CPU
// (LoadOptions::emulate_cuda_graphs: the keys, capture points and replays a GPU makes):
// `requests` requests of every method decoded with caches of their own (graphs captured per
// request, the target's forwards after the prefill counted) against caches from a worker's
// KV-cache pools, whose batched graphs are captured at load (engine/model/pool_graphs.h), one
// request at a time and `concurrency` at a time in one engine loop (every forward of every
// pooled model counted: target, drafter, chain, EAGLE head). Prints a markdown table; counts,
// not timings, so one run says it. A benchmark, not a test.
//
//   graph_reuse_bench --models=models/synth --requests=16 --concurrency=4
//   graph_reuse_bench --requests=4 --concurrency=4 --methods=eagle,lantern,peanut,sjd_pac
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench_flags.h"
#include "bench/family_inputs.h"
#include "engine/decode/engine_loop.h"
#include "engine/decode/generate.h"
#include "engine/decode/graphed_shapes.h"
#include "engine/decode/kv_demand.h"
#include "engine/decode/kv_pools.h"
#include "engine/decode/method_registry.h"

namespace mulo::bench {
namespace {

struct Flags {
  std::string models = "models/synth";
  std::string prompts = "models/synth/heldout_prompts.jsonl";
  int requests = 16;
  int concurrency = 4;
  std::string methods;  // comma list; empty: every method the family can run
};

// The methods named by --methods, or every method the family can run.
std::vector<std::string> MethodsToRun(const std::string& listed, const engine::ModelSet& family) {
  if (listed.empty()) return engine::AvailableMethods(family);
  std::vector<std::string> names;
  size_t start = 0;
  while (start <= listed.size()) {
    const size_t comma = std::min(listed.find(',', start), listed.size());
    if (comma > start) names.push_back(listed.substr(start, comma - start));
    start = comma + 1;
  }
  return names;
}

// Target forwards over all requests, those that replayed a graph and those that captured one.
struct GraphUse {
  int64_t forwards = 0, replayed = 0, captured = 0;
  std::string Replayed() const {
    char text[32];
    std::snprintf(text, sizeof(text), "%.1f%%", forwards ? 100.0 * replayed / forwards : 0.0);
    return text;
  }
};

// Decodes `conditions.size()` requests of `method`, `concurrency` at a time in one engine loop
// (1: one after another, no loop), each with caches from `pools` when given.
GraphUse Decode(const engine::ModelSet& family, const std::string& name,
                const engine::DecodingMethod& method,
                const std::vector<engine::Condition>& conditions, int concurrency,
                engine::KvPools* pools) {
  GraphUse use;
  engine::EngineLoop loop({/*max_rows=*/256, engine::PackedGemms::kShared});
  const auto decode = [&](size_t i) {
    engine::ForwardTrace trace;
    engine::DecodeRequest request;
    request.condition = conditions[i];
    request.sampling.cfg_scale = family.default_cfg_scale;
    request.sampling.seed = 1 + i;
    request.trace = &trace;
    request.loop = concurrency > 1 ? &loop : nullptr;
    std::unique_ptr<engine::KvReservation> reservation;
    if (pools != nullptr) {
      reservation = pools->Reserve(engine::RequestKvDemand(family, name, request.sampling));
      request.kv = reservation.get();
    }
    engine::NullProgressSink sink;
    engine::CancelToken cancel;
    auto result = method.Decode(request, family, sink, cancel);
    if (!result.ok()) {
      std::fprintf(stderr, "error: %s: %s\n", name.c_str(), result.status().ToString().c_str());
      std::exit(1);
    }
    if (pools != nullptr) return;  // the pools count their graphs' calls
    for (const engine::ForwardEvent& e : trace) {
      if (e.model != family.target.get() || e.context == 0) continue;  // the target after prefill
      ++use.forwards;
      use.replayed += e.graph;
      use.captured += e.captured;
    }
  };
  if (concurrency <= 1) {
    for (size_t i = 0; i < conditions.size(); ++i) decode(i);
    return use;
  }
  std::vector<engine::EngineLoop::Task> tasks;
  for (size_t i = 0; i < conditions.size(); ++i) tasks.push_back([&decode, i] { decode(i); });
  engine::EngineLoop::ListSource source(std::move(tasks), concurrency);
  if (!loop.Serve(source).ok()) std::exit(1);
  return use;
}

// Per pooled model, the calls its graphs replayed out of all its calls, and the graphs
// captured after load (none may be).
std::string PoolUse(const engine::KvPools& pools, const engine::PoolGraphs::Counts& at_load) {
  std::string text;
  for (const engine::KvPools::Usage& pool : pools.usage()) {
    const engine::PoolGraphs::Counts& c = pool.graphs;
    const int64_t calls = c.calls + c.eager_calls;
    if (calls == 0) continue;
    char cell[128];
    std::snprintf(cell, sizeof(cell), "%s%s %.1f%% of %ld (%ld replays)",
                  text.empty() ? "" : ", ", pool.component.c_str(), 100.0 * c.calls / calls,
                  calls, c.replays);
    text += cell;
  }
  char captured[48];
  std::snprintf(captured, sizeof(captured), " / %ld",
                pools.graph_counts().graphs - at_load.graphs);
  return text + captured;
}

int Run(const Flags& flags) {
  engine::LoadOptions options;
  options.emulate_cuda_graphs = true;
  auto inputs = LoadFamilyInputs(flags.models, flags.prompts, flags.requests, 1, options);
  if (!inputs) return 1;
  const engine::ModelSet& family = inputs->family;
  std::vector<engine::Condition> conditions;
  for (int i = 0; i < flags.requests; ++i) {
    auto condition = engine::ConditionFromPrompt(
        family, inputs->prompts[i % inputs->prompts.size()].prompt);
    if (!condition.ok()) {
      std::fprintf(stderr, "error: %s\n", condition.status().ToString().c_str());
      return 1;
    }
    conditions.push_back(*condition);
  }
  std::printf("%s, %d requests per cell, graphs emulated (buckets on). Own caches: the "
              "target's forwards after the prefill that replayed a graph / graphs captured. "
              "Pool: each pooled model's calls that replayed a graph captured at load (the "
              "replays that carried them) / graphs captured after load\n\n",
              family.name.c_str(), flags.requests);
  std::printf("| method | own caches, alone: target replayed / captures | pool, alone | pool, "
              "concurrency %d |\n|---|---:|---|---|\n",
              flags.concurrency);
  bool first = true;
  for (const std::string& name : MethodsToRun(flags.methods, family)) {
    const std::shared_ptr<const engine::DecodingMethod> method = DefaultMethod(name, family);
    if (method == nullptr) return 1;
    const GraphUse own = Decode(family, name, *method, conditions, 1, nullptr);
    auto pooled = engine::PoolFamily(family.name, family);
    if (!pooled.ok()) return 1;
    auto alone_pools = engine::KvPools::Make({*pooled}, 1);
    auto loop_pools = engine::KvPools::Make({*pooled}, flags.concurrency);
    if (!alone_pools.ok() || !loop_pools.ok()) return 1;
    const engine::PoolGraphs::Counts alone_load = (*alone_pools)->graph_counts();
    const engine::PoolGraphs::Counts loop_load = (*loop_pools)->graph_counts();
    if (first) {
      std::fprintf(stderr, "graphs at load: %ld for 1 request (%.1f s), %ld for %d (%.1f s)\n",
                   alone_load.graphs, alone_load.capture_seconds, loop_load.graphs,
                   flags.concurrency, loop_load.capture_seconds);
      first = false;
    }
    Decode(family, name, *method, conditions, 1, alone_pools->get());
    Decode(family, name, *method, conditions, flags.concurrency, loop_pools->get());
    std::printf("| %s | %s / %ld | %s | %s |\n", name.c_str(), own.Replayed().c_str(),
                own.captured, PoolUse(**alone_pools, alone_load).c_str(),
                PoolUse(**loop_pools, loop_load).c_str());
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace
}  // namespace mulo::bench

int main(int argc, char** argv) {
  mulo::bench::Flags flags;
  mulo::bench::FlagParser parser(
      "graph_reuse_bench: emulated CUDA graph replays per method, own caches against the pool");
  parser.Add("models", &flags.models, "model family directory");
  parser.Add("prompts", &flags.prompts, "held-out prompts (jsonl)");
  parser.Add("requests", &flags.requests, "requests per cell");
  parser.Add("concurrency", &flags.concurrency, "requests stepped together in the last column");
  parser.Add("methods", &flags.methods, "comma list of methods (default: every one available)");
  if (!parser.Parse(argc, argv)) return 2;
  if (flags.requests < 1 || flags.concurrency < 2) {
    std::fprintf(stderr, "error: --requests >= 1 and --concurrency >= 2\n");
    return 2;
  }
  return mulo::bench::Run(flags);
}
