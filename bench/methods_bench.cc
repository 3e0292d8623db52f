// Side-by-side comparison of decoding methods on the bundled family, in the
// style of the MuLo-SD paper's Table 1: ar, the --methods at their family defaults, and
// MuLo-SD variants (--ablation: the paper preset and the family default with each calibrated
// setting put back to the paper's; --mulo_grid: any list of option sets; --sweep: the
// older one-axis sweeps) over the same prompts and seeds in one run on one machine:
// wall-clock speedup vs ar, step compression, acceptance rate, target / draft forward
// passes, S_T, SynthEval score with its paired standard error vs ar and, with
// --seeds_per_prompt > 1, diversity (mean pairwise pixel distance between one prompt's
// samples) relative to ar. Writes <out_dir>/methods.md, methods.csv, (with --sweep) sweep.csv
// and (with --grid_out) an image grid: one row per prompt, one column per method.
//
//   bazel run //bench:methods_bench -- --models=$PWD/models/synth
//       --prompts=$PWD/models/synth/heldout_prompts.jsonl --limit=64
//       --out_dir=$PWD/out/bench
#include <torch/types.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
// The GPU machine's build (tools/build_engine.sh) carries OpenCV without imgcodecs: no grid there.
#if __has_include(<opencv2/imgcodecs.hpp>)
#include <opencv2/imgcodecs.hpp>
#define MULO_HAVE_IMGCODECS 1
#endif
#include <set>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/family_inputs.h"
#include "bench/mulo_studies.h"
#include "bench/rgb_mat.h"
#include "engine/decode/ar.h"
#include "engine/core/op_count.h"
#include "engine/decode/generate.h"
#include "engine/decode/kv_demand.h"
#include "engine/decode/graphed_shapes.h"
#include "engine/decode/kv_pools.h"
#include "engine/decode/method_registry.h"
#include "engine/decode/mulo.h"
#include "engine/decode/mulo_options.h"
#include "engine/decode/option_text.h"
#include "synth/heldout.h"
#include "synth/synth_eval.h"

ABSL_FLAG(std::string, models, "models/synth", "model family directory (family.json)");
ABSL_FLAG(std::string, prompts, "models/synth/heldout_prompts.jsonl", "held-out prompt set");
ABSL_FLAG(int, limit, 64, "use the first N prompts (0 = all)");
ABSL_FLAG(uint64_t, seed, 0, "prompt i uses seed + i");
ABSL_FLAG(double, temperature, 1.0, "sampling temperature");
ABSL_FLAG(int64_t, top_k, 0, "sampling top-k (0 = off)");
ABSL_FLAG(double, top_p, 1.0, "sampling top-p (1 = off)");
ABSL_FLAG(int, threads, 1, "torch intra-op threads");
ABSL_FLAG(int, warmup, -1,
          "untimed images per row on the first prompt before the timed ones (-1: 1 on CUDA, "
          "where a process's first images capture graphs and set up kernels and would be "
          "charged to whichever row runs first, ar; 0 on the CPU)");
ABSL_FLAG(bool, sweep, false, "also run MuLo-SD's ablation sweep");
ABSL_FLAG(std::vector<std::string>, sweep_groups, mulo::bench::MuloSweepAxes(),
          "with --sweep: which axes to sweep (tau = tau x rejection, radius, pooling, "
          "draft_rows, bounds = tau 0 and tau 2, prefix = the drafter keeps its own tokens)");
ABSL_FLAG(std::vector<std::string>, methods,
          std::vector<std::string>({"ar", "speculative", "mulo"}),
          "main methods to run (comma list of the registry's implemented methods, listed in "
          "the usage, or `available`: every method the family can run); ar always runs as the "
          "baseline. `--methods=ar --limit=32` times the engine alone for the "
          "same prompts and "
          "seeds as `mulo_client bench --requests=32 --prompts_file=...`");
ABSL_FLAG(std::string, out_dir, "out/bench", "where the tables go");
ABSL_FLAG(std::string, device, "cpu", "cpu or cuda: where the family lives and runs");
ABSL_FLAG(std::string, dtype, "float32", "compute dtype of the weights: float32 or bfloat16");
ABSL_FLAG(bool, cuda_graphs, true,
          "on a CUDA device, replay repeated transformer forward shapes as CUDA graphs");
ABSL_FLAG(bool, cuda_graph_buckets, true,
          "with --cuda_graphs: pad new rows to power-of-two buckets and capture masked forwards "
          "(draft trees, windows) too; false replays only causal forwards of repeated exact "
          "shapes (the behaviour before buckets, for paired runs)");
ABSL_FLAG(bool, ablation, false,
          "also run MuLo-SD's paper preset and the family default with each setting that "
          "differs from the paper's put back to the paper's value, one at a time");
ABSL_FLAG(std::string, mulo_grid, "",
          "also run the MuLo-SD option sets of this JSON file: an array of objects with the "
          "keys of family.json's method_defaults.mulo, plus \"name\" (the row label) and "
          "\"base\": \"paper\" (default) or \"family\" (what unset keys take)");
ABSL_FLAG(std::vector<std::string>, rows, {},
          "extra rows, each method:name=value:... over the family's defaults for the method, "
          "the names being the method's options (listed above the flags), e.g. "
          "lantern:k=1000:delta=0.1,eagle:total_tokens=8:depth=4:top_k=2,"
          "sjd:window=4:init=repeat_horizon,peanut:init=random");
ABSL_FLAG(int, seeds_per_prompt, 1,
          "samples per prompt (seeds seed + id + 100000 s); > 1 adds the diversity columns");
ABSL_FLAG(std::string, grid_out, "",
          "also write a PNG grid of the first --grid_prompts prompts (first seed): one column "
          "per method row");
ABSL_FLAG(int, grid_prompts, 8, "rows of --grid_out");
ABSL_FLAG(bool, emulate_cuda_graphs, false,
          "on the CPU, run the CUDA-graph path with each replay emulated (its captured body run "
          "eagerly; LoadOptions::emulate_cuda_graphs): the host-syncs table then counts graph "
          "replays per step and, with --count_ops, only the operators a GPU would dispatch "
          "outside graphs. With --kv_pool the graphs are the pools' (captured at load, as a "
          "server's); without, each request's own");
ABSL_FLAG(bool, fused_kernels, false,
          "run the decoder layers through the fused decode ops (LoadOptions::fused_kernels: the "
          "CUDA kernels in a build with them, their LibTorch references elsewhere)");
ABSL_FLAG(bool, kv_pool, false,
          "take every request's KV caches from a worker's pool of fixed slots, as the server "
          "does (engine/decode/kv_pools.h), instead of caches of their own");
ABSL_FLAG(bool, count_ops, false,
          "also count the ATen operators each request dispatches (engine/core/op_count.h: all, "
          "and the kernels among them) and print them per decode step; the observer slows "
          "every operator, so timings of such a run are not comparable with others");
ABSL_FLAG(bool, sync_phases, false,
          "on a GPU, every phase timer waits for the device, so the phase table charges kernels "
          "to the phase that launched them; the waits slow decoding, so speedups of such a run "
          "are not comparable with others. Off: a phase's seconds are the host's (on a CPU the "
          "two are the same)");
ABSL_FLAG(std::string, trace_out, "",
          "also write every request's transformer forwards (model, batch, new tokens, context, "
          "graph, operators dispatched inside it with --count_ops), phase times and host reads "
          "(with --count_ops also dispatched operators and kernels) as JSON lines here, for "
          "tools/gpu/project.py");

namespace mulo {
namespace {

// How a CUDA run's transformers launch their forwards, for the table's caption.
const char* GraphsLabel(const engine::LoadOptions& load) {
  if (load.emulate_cuda_graphs) return " with emulated CUDA graphs";
  if (!load.cuda_graphs) return " eager";
  return load.cuda_graph_buckets ? " with CUDA graphs (buckets)"
                                 : " with CUDA graphs (exact shapes)";
}


using engine::DecodingMethod;

struct Config {
  std::string name;
  std::string group;  // "main" or the sweep axis
  std::shared_ptr<const DecodingMethod> method;
  nlohmann::json mulo;  // MuLo-SD rows: every option (OptionsJson of its spec)
};

struct Row {
  Config config;
  int n = 0, pass = 0;
  double seconds = 0, target_forwards = 0, draft_forwards = 0, drafted = 0, accepted = 0,
         tokens = 0, resampled = 0, relaxed = 0, expansion = 0, prefix_own = 0,
         prefix_down = 0, verify_steps = 0, pooled_drafts = 0, pooled_neighbors = 0,
         tree_depth = 0, tree_width = 0, host_syncs = 0, dispatched_ops = 0,
         kernel_ops = 0, graph_replays = 0;
  std::vector<double> accepted_per_position;  // summed over samples
  std::array<double, engine::kNumPhases> phase_seconds{};
  std::vector<int> passes;         // per sample, in run order (paired with ar's)
  std::vector<double> diversity;   // per prompt: mean pairwise pixel distance of its samples
  std::vector<cv::Mat> grid;       // the first seed's images of the first --grid_prompts
};

Config MuloConfig(const bench::MuloRow& row) {
  return Config{row.name, row.group, std::make_shared<engine::MuloDecoder>(row.options),
                bench::MuloJson(row.options)};
}

// Mean over pairs of the mean absolute difference of two images' pixels (0..255).
double MeanPairwiseDistance(const std::vector<cv::Mat>& images) {
  double sum = 0;
  int pairs = 0;
  for (size_t a = 0; a < images.size(); ++a) {
    for (size_t b = a + 1; b < images.size(); ++b) {
      cv::Mat diff;
      cv::absdiff(images[a], images[b], diff);
      const cv::Scalar mean = cv::mean(diff);
      sum += (mean[0] + mean[1] + mean[2]) / 3.0;
      ++pairs;
    }
  }
  return pairs ? sum / pairs : 0.0;
}

double Mean(const std::vector<double>& xs) {
  double sum = 0;
  for (double x : xs) sum += x;
  return xs.empty() ? 0.0 : sum / xs.size();
}

// The standard error of the mean paired difference of pass rates, in points.
double PairedStandardError(const std::vector<int>& a, const std::vector<int>& b) {
  const size_t n = std::min(a.size(), b.size());
  if (n < 2) return 0.0;
  std::vector<double> d(n);
  for (size_t i = 0; i < n; ++i) d[i] = 100.0 * (a[i] - b[i]);
  const double mean = Mean(d);
  double var = 0;
  for (double x : d) var += (x - mean) * (x - mean);
  return std::sqrt(var / (n - 1) / n);
}

// The family's transformers by name, to label trace events.
std::string ModelName(const engine::ModelSet& family, const void* model) {
  if (model == family.target.get()) return "target";
  if (model == family.drafter.get()) return "drafter";
  if (model == family.chain.get()) return "chain";
  return "other";
}

// A --rows entry, method:name=value:..., the names being the method's options (its spec's,
// listed in the usage), over the family's defaults for the method.
engine::StatusOr<engine::MethodConfig> ParseRow(const std::string& spec,
                                                const engine::ModelSet& family) {
  std::vector<std::string> parts = absl::StrSplit(spec, ':');
  MULO_ASSIGN_OR_RETURN(engine::MethodConfig m, engine::DefaultMethodConfig(parts[0], family));
  const engine::MethodEntry* entry = engine::FindMethod(m.name);
  if (entry == nullptr) {
    return engine::InvalidArgumentError(spec + ": unknown method '" + m.name + "' (" +
                                        engine::MethodList() + ")");
  }
  parts.erase(parts.begin());
  MULO_RETURN_IF_ERROR(engine::ApplyOptionAssignments(*entry, parts, spec, m));
  return m;
}

// --methods with its selectors expanded, in registry order: `available` (every method the
// family can run), `with:C` / `without:C` (those that need component C, e.g. `with:eagle` for
// the EAGLE-head tree methods, or do not). Auto is left out of them: it picks one of the others.
std::vector<std::string> ExpandMethodSelectors(const std::vector<std::string>& listed,
                                               const engine::ModelSet& family) {
  std::vector<std::string> names;
  for (const std::string& item : listed) {
    const bool with = absl::StartsWith(item, "with:");
    const bool without = absl::StartsWith(item, "without:");
    if (item != "available" && !with && !without) {
      names.push_back(item);
      continue;
    }
    const std::string component = item.substr(item.find(':') + 1);
    for (const std::string& name : engine::AvailableMethods(family)) {
      const engine::MethodEntry& entry = *engine::FindMethod(name);
      if (!entry.make) continue;
      const bool needs = std::any_of(entry.needs.begin(), entry.needs.end(), [&](auto c) {
        return component == engine::ComponentName(c);
      });
      if (item == "available" || needs == with) names.push_back(name);
    }
  }
  return names;
}

// The load options the flags ask for; nullopt after saying which flag is wrong.
std::optional<engine::LoadOptions> LoadOptionsFromFlags() {
  engine::LoadOptions load;
  const std::string device_name = absl::GetFlag(FLAGS_device);
  if (device_name != "cpu" && device_name != "cuda") {
    std::fprintf(stderr, "error: --device: expected cpu or cuda, got \"%s\"\n",
                 device_name.c_str());
    return std::nullopt;
  }
  load.device = torch::Device(device_name);
  const std::string dtype = absl::GetFlag(FLAGS_dtype);
  if (dtype == "bfloat16") {
    load.dtype = torch::kBFloat16;
  } else if (dtype != "float32") {
    std::fprintf(stderr, "error: --dtype: expected float32 or bfloat16, got \"%s\"\n",
                 dtype.c_str());
    return std::nullopt;
  }
  load.cuda_graphs = absl::GetFlag(FLAGS_cuda_graphs);
  load.cuda_graph_buckets = absl::GetFlag(FLAGS_cuda_graph_buckets);
  load.emulate_cuda_graphs = absl::GetFlag(FLAGS_emulate_cuda_graphs);
  load.fused_kernels = absl::GetFlag(FLAGS_fused_kernels);
  if (load.emulate_cuda_graphs && load.device.is_cuda()) {
    std::fprintf(stderr, "error: --emulate_cuda_graphs: only on --device=cpu (a GPU replays "
                         "its graphs)\n");
    return std::nullopt;
  }
  return load;
}

// --trace_out opened (closed when unset); false after saying why it cannot be written.
bool OpenTrace(std::ofstream& trace_file) {
  const std::string trace_path = absl::GetFlag(FLAGS_trace_out);
  if (trace_path.empty()) return true;
  const auto parent = std::filesystem::path(trace_path).parent_path();
  std::error_code ignored;
  if (!parent.empty()) std::filesystem::create_directories(parent, ignored);
  trace_file.open(trace_path);
  if (!trace_file) {
    std::fprintf(stderr, "error: --trace_out: cannot write %s\n", trace_path.c_str());
    return false;
  }
  return true;
}

// The rows every method gets: ar first (the baseline), then each --methods entry at its family
// defaults with its spec's bench variants, then the --rows entries. False after saying why.
bool AddMethodRows(const engine::ModelSet& family, const engine::MethodConfig& defaults,
                   std::vector<Config>& configs) {
  std::vector<std::string> wanted = ExpandMethodSelectors(absl::GetFlag(FLAGS_methods), family);
  wanted.erase(std::remove(wanted.begin(), wanted.end(), "ar"), wanted.end());
  wanted.insert(wanted.begin(), "ar");
  // A row for `config`, labelled by OptionsLabel (what differs from `defaults`); false (after
  // saying why, naming `flag`) when the registry refuses it.
  auto add_row = [&](const engine::MethodConfig& config, const std::string& group,
                     const char* flag) {
    auto made = engine::MakeMethod(config, family);
    if (!made.ok()) {
      std::fprintf(stderr, "error: %s: %s\n", flag, made.status().ToString().c_str());
      return false;
    }
    configs.push_back(
        {engine::OptionsLabel(*engine::FindMethod(config.name), config, defaults), group, *made});
    return true;
  };
  for (const std::string& name : wanted) {
    auto method = engine::DefaultMethodConfig(name, family);
    if (!method.ok()) {
      std::fprintf(stderr, "error: --methods: %s\n", method.status().ToString().c_str());
      return false;
    }
    if (!add_row(*method, "main", "--methods")) return false;
    if (name == "mulo") configs.back().mulo = bench::MuloJson(method->mulo);
    const engine::MethodEntry& entry = *engine::FindMethod(name);
    for (const std::vector<std::string>& variant : entry.bench_variants) {
      engine::MethodConfig config = *method;
      engine::Status set = engine::ApplyOptionAssignments(entry, variant, name, config);
      if (!set.ok()) {
        std::fprintf(stderr, "error: %s\n", set.ToString().c_str());
        return false;
      }
      if (!add_row(config, "main", "--methods")) return false;
    }
  }
  for (const std::string& spec : absl::GetFlag(FLAGS_rows)) {
    auto parsed = ParseRow(spec, family);
    if (!parsed.ok()) {
      std::fprintf(stderr, "error: --rows: %s\n", parsed.status().ToString().c_str());
      return false;
    }
    if (!add_row(*parsed, "rows", "--rows")) return false;
  }
  return true;
}

// MuLo-SD's studies the flags ask for (bench/mulo_studies.h). False after saying why.
bool AddMuloStudies(const engine::MethodConfig& defaults, std::vector<Config>& configs) {
  std::vector<bench::MuloRow> studies;
  if (absl::GetFlag(FLAGS_ablation)) studies = bench::MuloAblationRows(defaults.mulo);
  if (const std::string grid_path = absl::GetFlag(FLAGS_mulo_grid); !grid_path.empty()) {
    auto grid = bench::MuloGridRows(grid_path, defaults);
    if (!grid.ok()) {
      std::fprintf(stderr, "error: %s\n", grid.status().ToString().c_str());
      return false;
    }
    studies.insert(studies.end(), grid->begin(), grid->end());
  }
  auto sweep = bench::MuloSweepRows(absl::GetFlag(FLAGS_sweep_groups));
  if (!sweep.ok()) {
    std::fprintf(stderr, "error: %s\n", sweep.status().ToString().c_str());
    return false;
  }
  if (absl::GetFlag(FLAGS_sweep)) studies.insert(studies.end(), sweep->begin(), sweep->end());
  for (const bench::MuloRow& row : studies) configs.push_back(MuloConfig(row));
  return true;
}

// The flags' sampling settings with `seed`.
engine::SamplingParams Sampling(const engine::ModelSet& family, uint64_t seed) {
  engine::SamplingParams sampling;
  sampling.cfg_scale = family.default_cfg_scale;
  sampling.temperature = absl::GetFlag(FLAGS_temperature);
  sampling.top_k = absl::GetFlag(FLAGS_top_k);
  sampling.top_p = absl::GetFlag(FLAGS_top_p);
  sampling.seed = seed;
  return sampling;
}

// One image's statistics and verdict added to its row.
void Accumulate(const engine::Stats& s, int pass, Row& row) {
  ++row.n;
  row.pass += pass;
  row.passes.push_back(pass);
  row.seconds += s.total_seconds;
  row.target_forwards += s.target_forward_passes;
  row.draft_forwards += s.draft_forward_passes;
  row.drafted += s.drafted_tokens;
  row.accepted += s.accepted_tokens;
  row.tokens += s.tokens;
  row.resampled += s.resampled_tokens;
  row.relaxed += s.relaxed_accepted_tokens;
  row.expansion += s.expansion_resampled_tokens;
  row.prefix_own += s.prefix_own_tokens;
  row.prefix_down += s.prefix_downsampled_tokens;
  row.verify_steps += s.verify_steps;
  row.pooled_drafts += s.pooled_drafts;
  row.pooled_neighbors += s.pooled_neighbors;
  row.tree_depth += s.drafted_tree_depth;
  row.tree_width += s.drafted_tree_width;
  row.host_syncs += s.host_syncs;
  row.dispatched_ops += s.dispatched_ops;
  row.kernel_ops += s.kernel_ops;
  row.graph_replays += s.graph_replays;
  if (row.accepted_per_position.size() < s.accepted_per_position.size()) {
    row.accepted_per_position.resize(s.accepted_per_position.size(), 0.0);
  }
  for (size_t d = 0; d < s.accepted_per_position.size(); ++d) {
    row.accepted_per_position[d] += s.accepted_per_position[d];
  }
  for (int p = 0; p < engine::kNumPhases; ++p) row.phase_seconds[p] += s.phase_seconds[p];
}

// One request's --trace_out line.
nlohmann::json TraceLine(const engine::ModelSet& family, const std::string& method, int prompt,
                         uint64_t seed, const engine::Stats& s,
                         const engine::ForwardTrace& trace) {
  nlohmann::json line = {{"method", method},           {"prompt", prompt},
                         {"seed", seed},               {"seconds", s.total_seconds},
                         {"tokens", s.tokens},         {"host_syncs", s.host_syncs},
                         {"graph_replays", s.graph_replays}};
  if (absl::GetFlag(FLAGS_count_ops)) {
    line["dispatched_ops"] = s.dispatched_ops;
    line["kernel_ops"] = s.kernel_ops;
  }
  for (int p = 0; p < engine::kNumPhases; ++p) {
    line["phases"][engine::PhaseName(static_cast<engine::Phase>(p))] = s.phase_seconds[p];
  }
  line["forwards"] = nlohmann::json::array();
  for (const engine::ForwardEvent& e : trace) {
    line["forwards"].push_back(
        {ModelName(family, e.model), e.batch, e.new_tokens, e.context, e.graph, e.dispatched_ops});
  }
  return line;
}

// What RunRows decodes with, besides the rows.
struct RunContext {
  const engine::ModelSet* family = nullptr;
  const std::vector<synth::HeldoutEntry>* prompts = nullptr;
  engine::KvPools* kv_pools = nullptr;  // null: every request's caches are its own
  std::ofstream* trace_file = nullptr;  // closed: no trace
  int warmup = 0;
  int seeds = 1;
  size_t grid_prompts = 0;
};

// --kv_pool's pools (null without the flag); false after saying why they cannot be made.
bool MakeKvPools(const engine::ModelSet& family, std::unique_ptr<engine::KvPools>& pools) {
  if (!absl::GetFlag(FLAGS_kv_pool)) return true;
  auto pooled = engine::PoolFamily(family.name, family);
  if (!pooled.ok()) {
    std::fprintf(stderr, "error: --kv_pool: %s\n", pooled.status().ToString().c_str());
    return false;
  }
  auto made = engine::KvPools::Make({*pooled}, 1);
  if (!made.ok()) {
    std::fprintf(stderr, "error: --kv_pool: %s\n", made.status().ToString().c_str());
    return false;
  }
  pools = std::move(*made);
  return true;
}

// Every row on every prompt and seed, interleaved per prompt so that slow drifts of the
// machine hit every method alike, after the untimed warm-up images. False after saying which
// request failed.
bool RunRows(const RunContext& run, std::vector<Row>& rows) {
  const engine::ModelSet& family = *run.family;
  const auto& prompts = *run.prompts;
  synth::SynthEval judge;
  engine::NullProgressSink sink;
  engine::CancelToken cancel;
  for (int w = 0; w < run.warmup && !prompts.empty(); ++w) {
    const engine::SamplingParams sampling =
        Sampling(family, absl::GetFlag(FLAGS_seed) + 1000000u + static_cast<uint64_t>(w));
    for (const Row& row : rows) {
      auto result = engine::GenerateImage(*row.config.method, family, prompts[0].prompt,
                                          sampling, sink, cancel, engine::GenerateOptions{});
      if (!result.ok()) {
        std::fprintf(stderr, "error (%s, warm-up): %s\n", row.config.name.c_str(),
                     result.status().ToString().c_str());
        return false;
      }
    }
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto& entry = prompts[i];
    std::vector<std::vector<cv::Mat>> samples(rows.size());
    for (int s_index = 0; s_index < run.seeds; ++s_index) {
      const engine::SamplingParams sampling =
          Sampling(family, absl::GetFlag(FLAGS_seed) + static_cast<uint64_t>(entry.id) +
                               100000u * static_cast<uint64_t>(s_index));
      for (size_t r = 0; r < rows.size(); ++r) {
        Row& row = rows[r];
        engine::ForwardTrace trace;
        std::optional<engine::OpCounting> counting;
        if (absl::GetFlag(FLAGS_count_ops)) counting.emplace();
        engine::GenerateOptions options;
        options.trace = run.trace_file->is_open() ? &trace : nullptr;
        options.synchronize_phases = absl::GetFlag(FLAGS_sync_phases);
        std::unique_ptr<engine::KvReservation> reservation;
        if (run.kv_pools != nullptr) {
          reservation = run.kv_pools->Reserve(
              engine::RequestKvDemand(family, row.config.method->name(), sampling));
          options.kv = reservation.get();
        }
        auto result = engine::GenerateImage(*row.config.method, family, entry.prompt, sampling,
                                            sink, cancel, options);
        if (!result.ok()) {
          std::fprintf(stderr, "error (%s, prompt %d): %s\n", row.config.name.c_str(), entry.id,
                       result.status().ToString().c_str());
          return false;
        }
        cv::Mat image = bench::ToRgbMat(result->image);
        auto verdict = judge.Evaluate(entry.prompt, image);
        Accumulate(result->stats, verdict.ok() && verdict->pass, row);
        if (run.seeds > 1) samples[r].push_back(image.clone());
        if (s_index == 0 && i < run.grid_prompts) row.grid.push_back(image.clone());
        if (run.trace_file->is_open()) {
          *run.trace_file << TraceLine(family, row.config.name, entry.id, sampling.seed,
                                       result->stats, trace)
                                 .dump()
                          << "\n";
        }
      }
    }
    if (run.seeds > 1) {
      for (size_t r = 0; r < rows.size(); ++r) {
        rows[r].diversity.push_back(MeanPairwiseDistance(samples[r]));
      }
    }
    std::fprintf(stderr, "\r[%zu/%zu prompts]", i + 1, prompts.size());
  }
  std::fprintf(stderr, "\n");
  return true;
}

// The tables' caption: the run's settings.
std::string Header(const engine::ModelSet& family, const engine::LoadOptions& load,
                   size_t count, int seeds, int warmup) {
  const int64_t n_tokens = family.target->num_image_tokens();
  const int64_t n_draft = family.drafter ? family.drafter->num_image_tokens() : 0;
  return absl::StrFormat(
      "%zu prompts x %d seed(s) (%s), seeds %d + id%s, temperature %.2f%s, cfg %.2f, %d torch "
      "thread(s), %s %s%s; "
      "%d target tokens, %d drafter tokens per image; %d untimed warm-up image(s) per row; "
      "SynthEval delta vs ar with its paired standard error%s\n\n",
      count, seeds, absl::GetFlag(FLAGS_prompts), absl::GetFlag(FLAGS_seed),
      seeds > 1 ? " + 100000 s" : "", absl::GetFlag(FLAGS_temperature),
      absl::StrFormat("%s%s",
                      absl::GetFlag(FLAGS_top_k) > 0
                          ? absl::StrFormat(", top-k %d", absl::GetFlag(FLAGS_top_k))
                          : "",
                      absl::GetFlag(FLAGS_top_p) < 1.0
                          ? absl::StrFormat(", top-p %.2f", absl::GetFlag(FLAGS_top_p))
                          : ""),
      family.default_cfg_scale, absl::GetFlag(FLAGS_threads), absl::GetFlag(FLAGS_device),
      absl::GetFlag(FLAGS_dtype),
      load.device.is_cuda() || load.emulate_cuda_graphs ? GraphsLabel(load) : "", n_tokens,
      n_draft, warmup,
      seeds > 1 ? "; diversity = mean pairwise pixel distance (0-255) between one prompt's "
                  "samples, relative to ar's"
                : "");
}

// The main table: methods.md (and stdout), methods.csv and, for the rows outside the main
// group, sweep.csv when it is open.
void WriteMethodTables(const engine::ModelSet& family, const std::vector<Row>& rows, int seeds,
                       const std::string& header, std::ostream& md, std::ostream& csv,
                       std::ofstream& sweep) {
  const int64_t n_tokens = family.target->num_image_tokens();
  const int64_t n_draft = family.drafter ? family.drafter->num_image_tokens() : 0;
  const Row& ar = rows[0];
  md << header
     << "| method | s / image | speedup vs ar | step compression | acceptance | relaxed "
        "| target fwd | draft fwd | S_T | SynthEval | delta vs ar |"
     << (seeds > 1 ? " diversity vs ar |" : "") << "\n"
     << "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|" << (seeds > 1 ? "---:|" : "")
     << "\n";
  csv << "method,group,seconds_per_image,speedup,step_compression,acceptance,"
         "target_forwards,draft_forwards,theoretical_speedup,syntheval,syntheval_delta,"
         "syntheval_delta_se,diversity,diversity_vs_ar,relaxed_accepted_fraction,"
         "expansion_resampled_per_image,prefix_own_fraction,tau,radius,k,rejection,draft_rows,"
         "prefix,pooling,delta,lambda,draft_cfg_scale\n";
  const double ar_diversity = Mean(ar.diversity);
  for (const Row& row : rows) {
    const double sec = row.seconds / row.n, ar_sec = ar.seconds / ar.n;
    const double acceptance = row.drafted > 0 ? row.accepted / row.drafted : 0;
    const bool is_mulo = !row.config.mulo.is_null();
    const double st = is_mulo ? engine::TheoreticalSpeedup(acceptance, n_tokens, n_draft) : 0;
    const double score = 100.0 * row.pass / row.n, ar_score = 100.0 * ar.pass / ar.n;
    const double se = PairedStandardError(row.passes, ar.passes);
    const double diversity = Mean(row.diversity);
    const double diversity_ratio = ar_diversity > 0 ? diversity / ar_diversity : 0;
    const double relaxed = row.accepted > 0 ? row.relaxed / row.accepted : 0;
    const std::string line = absl::StrFormat(
        "| %s | %.3f | %.2fx | %.2f | %s | %s | %.1f | %.1f | %s | %.1f%% | %+.1f +- %.1f |%s\n",
        row.config.name, sec, ar_sec / sec, row.tokens / row.target_forwards,
        row.drafted > 0 ? absl::StrFormat("%.3f", acceptance) : "-",
        is_mulo || row.relaxed > 0 ? absl::StrFormat("%.3f", relaxed) : "-",
        row.target_forwards / row.n,
        row.draft_forwards / row.n, is_mulo ? absl::StrFormat("%.2f", st) : "-", score,
        score - ar_score, se,
        seeds > 1 ? absl::StrFormat(" %.0f%% |", 100 * diversity_ratio) : "");
    const nlohmann::json& m = row.config.mulo;
    auto field = [&](const char* key) -> std::string {
      if (!is_mulo || !m.contains(key)) return "";
      return m[key].is_string() ? m[key].get<std::string>() : m[key].dump();
    };
    const double prefix_total = row.prefix_own + row.prefix_down;
    const std::string csv_line = absl::StrFormat(
        "\"%s\",%s,%.4f,%.4f,%.4f,%.4f,%.2f,%.2f,%.4f,%.2f,%.2f,%.2f,%.3f,%.4f,%.4f,%.2f,%.4f,"
        "%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n",
        row.config.name, row.config.group, sec, ar_sec / sec, row.tokens / row.target_forwards,
        acceptance, row.target_forwards / row.n, row.draft_forwards / row.n, st, score,
        score - ar_score, se, diversity, diversity_ratio, relaxed, row.expansion / row.n,
        prefix_total > 0 ? row.prefix_own / prefix_total : 0, field("tau"), field("radius"),
        field("k"), field("rejection"), field("draft_rows"), field("draft_prefix"),
        field("pooling"), field("delta"), field("lambda"), field("draft_cfg_scale"));
    md << line;
    csv << csv_line;
    if (sweep.is_open() && row.config.group != "main") sweep << csv_line;
    std::fputs(line.c_str(), stdout);
  }
}

// --grid_out: one column per method row, one row per prompt, 2x nearest-neighbour so 64 px
// reads. False after saying why it cannot be written.
bool WriteGrid(const std::vector<Row>& rows) {
  const std::string path = absl::GetFlag(FLAGS_grid_out);
  if (path.empty() || rows.empty() || rows[0].grid.empty()) return true;
  std::vector<cv::Mat> lines;
  for (size_t p = 0; p < rows[0].grid.size(); ++p) {
    std::vector<cv::Mat> cells;
    for (const Row& row : rows) {
      cv::Mat big;
      cv::resize(row.grid[p], big, cv::Size(), 2, 2, cv::INTER_NEAREST);
      cv::copyMakeBorder(big, big, 2, 2, 2, 2, cv::BORDER_CONSTANT, cv::Scalar(255, 255, 255));
      cells.push_back(big);
    }
    cv::Mat line;
    cv::hconcat(cells, line);
    lines.push_back(line);
  }
  cv::Mat grid, bgr;
  cv::vconcat(lines, grid);
  cv::cvtColor(grid, bgr, cv::COLOR_RGB2BGR);
#ifdef MULO_HAVE_IMGCODECS
  const bool written = cv::imwrite(path, bgr);
#else
  const bool written = false;
#endif
  if (!written) {
    std::fprintf(stderr, "error: --grid_out: cannot write %s\n", path.c_str());
    return false;
  }
  std::string columns;
  for (const Row& row : rows) {
    absl::StrAppend(&columns, columns.empty() ? "" : " | ", row.config.name);
  }
  std::printf("grid %s: columns %s\n", path.c_str(), columns.c_str());
  return true;
}

// Where the time goes: mean seconds per image by phase, and re-sampled tokens.
std::string PhaseTable(const std::vector<Row>& rows, const engine::LoadOptions& load) {
  std::string phases = absl::StrCat(
      "\nmean seconds per image by phase (",
      load.device.is_cuda() && !absl::GetFlag(FLAGS_sync_phases)
          ? "host time: the GPU runs ahead, --sync_phases charges its kernels; "
          : "",
      "and re-sampled tokens per image)\n\n| method |");
  std::string rule = "|---|";
  for (int p = 0; p < engine::kNumPhases; ++p) {
    absl::StrAppend(&phases, " ", engine::PhaseName(static_cast<engine::Phase>(p)), " |");
    absl::StrAppend(&rule, "---:|");
  }
  absl::StrAppend(&phases, " re-sampled |\n", rule, "---:|\n");
  for (const Row& row : rows) {
    absl::StrAppend(&phases, "| ", row.config.name, " |");
    for (int p = 0; p < engine::kNumPhases; ++p) {
      absl::StrAppend(&phases, absl::StrFormat(" %.4f |", row.phase_seconds[p] / row.n));
    }
    absl::StrAppend(&phases, absl::StrFormat(" %.1f |\n", row.resampled / row.n));
  }
  return phases;
}

// Device -> host reads (host synchronisations on a GPU, counted on every device), graph
// replays and operators per decoding step: a verify step (parallel step), or a sampled token
// for methods without them (ar).
std::string HostSyncTable(const std::vector<Row>& rows) {
  std::string syncs =
      "\nhost syncs (device -> host reads), graph replays and operators dispatched outside "
      "graphs (prefill and decoding, not the image decode)\n\n"
      "| method | host syncs / image | decode steps / image | host syncs / step |"
      " graph replays / step | dispatched ops / step | kernels / step |\n"
      "|---|---:|---:|---:|---:|---:|---:|\n";
  const bool counted_ops = absl::GetFlag(FLAGS_count_ops);
  for (const Row& row : rows) {
    const double steps = row.verify_steps > 0 ? row.verify_steps : row.tokens;
    auto per_step = [&](double total) { return steps > 0 ? total / steps : 0.0; };
    absl::StrAppend(
        &syncs,
        absl::StrFormat("| %s | %.1f | %.1f | %.2f | %.2f | %s | %s |\n", row.config.name,
                        row.host_syncs / row.n, steps / row.n, per_step(row.host_syncs),
                        per_step(row.graph_replays),
                        counted_ops ? absl::StrFormat("%.0f", per_step(row.dispatched_ops)) : "-",
                        counted_ops ? absl::StrFormat("%.0f", per_step(row.kernel_ops)) : "-"));
  }
  return syncs;
}

// Tree and chain methods: how long the accepted paths are and, for the relaxed rules, how
// much of it the relaxation bought and how large the pooled sets were. Empty when no row
// verified drafts.
std::string PathTable(const std::vector<Row>& rows) {
  std::string paths =
      "\ndraft paths: mean accepted length per verify step, accepted drafts per image at depth "
      "1..6, the fraction of accepted drafts only the relaxation kept, mean pooled neighbours "
      "|A| - 1 per judged draft, the drafted trees' mean depth and width (tree methods)\n\n"
      "| method | mean accepted length | depth 1 | 2 | 3 | 4 | 5 | 6 | relaxed | mean abs(A) - 1 "
      "| tree depth | tree width |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  bool any_paths = false;
  for (const Row& row : rows) {
    if (row.verify_steps == 0 || row.accepted_per_position.empty()) continue;
    any_paths = true;
    absl::StrAppend(&paths, "| ", row.config.name, " | ",
                    absl::StrFormat("%.2f", row.accepted / row.verify_steps), " |");
    for (size_t d = 0; d < 6; ++d) {
      const double v = d < row.accepted_per_position.size() ? row.accepted_per_position[d] : 0;
      absl::StrAppend(&paths, absl::StrFormat(" %.1f |", v / row.n));
    }
    absl::StrAppend(
        &paths,
        row.accepted > 0 ? absl::StrFormat(" %.3f |", row.relaxed / row.accepted) : " - |",
        row.pooled_drafts > 0
            ? absl::StrFormat(" %.2f |", row.pooled_neighbors / row.pooled_drafts)
            : " - |",
        row.tree_depth > 0 ? absl::StrFormat(" %.2f |", row.tree_depth / row.verify_steps)
                           : " - |",
        row.tree_width > 0 ? absl::StrFormat(" %.2f |\n", row.tree_width / row.verify_steps)
                           : " - |\n");
  }
  return any_paths ? paths : "";
}

int Run() {
  const std::optional<engine::LoadOptions> load = LoadOptionsFromFlags();
  if (!load) return 2;
  auto inputs = bench::LoadFamilyInputs(absl::GetFlag(FLAGS_models), absl::GetFlag(FLAGS_prompts),
                                        absl::GetFlag(FLAGS_limit), absl::GetFlag(FLAGS_threads),
                                        *load);
  if (!inputs) return 1;
  std::ofstream trace_file;
  if (!OpenTrace(trace_file)) return 2;
  const engine::ModelSet& family = inputs->family;
  // The family's defaults of every method: what a row's label leaves out.
  auto defaults = engine::DefaultMethodConfig("ar", family);
  if (!defaults.ok()) {
    std::fprintf(stderr, "error: %s\n", defaults.status().ToString().c_str());
    return 2;
  }
  std::vector<Config> configs;
  if (!AddMethodRows(family, *defaults, configs) || !AddMuloStudies(*defaults, configs)) return 2;
  std::vector<Row> rows;
  for (const Config& config : configs) rows.push_back(Row{config});

  std::unique_ptr<engine::KvPools> kv_pools;
  if (!MakeKvPools(family, kv_pools)) return 1;
  RunContext run;
  run.family = &family;
  run.prompts = &inputs->prompts;
  run.kv_pools = kv_pools.get();
  run.trace_file = &trace_file;
  run.warmup = absl::GetFlag(FLAGS_warmup);
  if (run.warmup < 0) run.warmup = load->device.is_cuda() ? 1 : 0;
  run.seeds = std::max(1, absl::GetFlag(FLAGS_seeds_per_prompt));
  run.grid_prompts = absl::GetFlag(FLAGS_grid_out).empty()
                         ? 0
                         : static_cast<size_t>(absl::GetFlag(FLAGS_grid_prompts));
  if (!RunRows(run, rows)) return 1;

  const std::string dir = absl::GetFlag(FLAGS_out_dir);
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  std::ofstream md(dir + "/methods.md"), csv(dir + "/methods.csv"), sweep;
  if (absl::GetFlag(FLAGS_sweep)) sweep.open(dir + "/sweep.csv");
  const std::string header =
      Header(family, *load, inputs->prompts.size(), run.seeds, run.warmup);
  WriteMethodTables(family, rows, run.seeds, header, md, csv, sweep);
  if (!WriteGrid(rows)) return 1;
  for (const std::string& table : {PhaseTable(rows, *load), HostSyncTable(rows), PathTable(rows)}) {
    md << table;
    std::fputs(table.c_str(), stdout);
  }
  std::fputs(header.c_str(), stdout);
  std::printf("\nwrote %s/methods.md and methods.csv%s\n", dir.c_str(),
              sweep.is_open() ? " and sweep.csv" : "");
  return 0;
}

}  // namespace
}  // namespace mulo

int main(int argc, char** argv) {
  std::string usage =
      "decoding methods side by side on the bundled family\n  --methods: implemented methods "
      "of " + mulo::engine::MethodList() + "\n  --rows: each method's options:\n";
  for (const mulo::engine::MethodEntry& method : mulo::engine::Methods()) {
    if (!method.implemented || method.options.empty()) continue;
    usage += "    " + method.name + "\n" + mulo::engine::OptionsHelp(method, "      ");
  }
  absl::SetProgramUsageMessage(usage);
  absl::ParseCommandLine(argc, argv);
  return mulo::Run();
}
