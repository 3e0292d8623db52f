// Side-by-side comparison of decoding methods on the bundled family, in the
// style of the MuLo-SD paper's Table 1: for ar, speculative and mulo (and, with
// --sweep, MuLo-SD's ablations: tau, radius, local vs raster rejection, pooling
// on/off, drafter rows per step, the accept-all / accept-none bounds, and the
// drafter prefix kept from its own tokens instead of D_r's) over the same
// held-out prompts and seeds in one run on one machine:
// wall-clock speedup vs ar, step compression, acceptance rate, target / draft
// forward passes, S_T, SynthEval score and its delta vs ar. Writes
// <out_dir>/methods.md, methods.csv and (with --sweep) sweep.csv; plot the
// sweep with tools/synth/plot_sweep.py.
//
//   bazel run //bench:methods_bench -- --models=$PWD/models/synth
//       --prompts=$PWD/models/synth/heldout_prompts.jsonl --limit=64
//       --out_dir=$PWD/out/bench
#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <opencv2/core.hpp>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bench/family_inputs.h"
#include "bench/rgb_mat.h"
#include "engine/decode/ar.h"
#include "engine/decode/generate.h"
#include "engine/decode/method_registry.h"
#include "engine/decode/mulo.h"
#include "synth/heldout.h"
#include "synth/synth_eval.h"

ABSL_FLAG(std::string, models, "models/synth", "model family directory (family.json)");
ABSL_FLAG(std::string, prompts, "models/synth/heldout_prompts.jsonl", "held-out prompt set");
ABSL_FLAG(int, limit, 64, "use the first N prompts (0 = all)");
ABSL_FLAG(uint64_t, seed, 0, "prompt i uses seed + i");
ABSL_FLAG(double, temperature, 1.0, "sampling temperature");
ABSL_FLAG(int, threads, 1, "torch intra-op threads");
ABSL_FLAG(bool, sweep, false, "also run MuLo-SD's ablation sweep");
namespace {
// The sweep's axes, in the order they run: the flag's default, its check and its message.
const std::vector<std::string>& SweepAxes() {
  static const auto* axes =
      new std::vector<std::string>({"tau", "radius", "pooling", "draft_rows", "bounds", "prefix"});
  return *axes;
}
}  // namespace
ABSL_FLAG(std::vector<std::string>, sweep_groups, SweepAxes(),
          "with --sweep: which axes to sweep (tau = tau x rejection, radius, pooling, "
          "draft_rows, bounds = tau 0 and tau 2, prefix = the drafter keeps its own tokens)");
ABSL_FLAG(std::vector<std::string>, methods,
          std::vector<std::string>({"ar", "speculative", "mulo"}),
          "main methods to run (comma list of the registry's implemented methods, listed in "
          "the usage); ar always runs as the baseline. `--methods=ar --limit=32` times the engine alone for the "
          "same prompts and "
          "seeds as `mulo_client bench --requests=32 --prompts_file=...`");
ABSL_FLAG(std::string, out_dir, "out/bench", "where the tables go");
ABSL_FLAG(std::string, device, "cpu", "cpu or cuda: where the family lives and runs");
ABSL_FLAG(std::string, dtype, "float32", "compute dtype of the weights: float32 or bfloat16");
ABSL_FLAG(bool, cuda_graphs, true,
          "on a CUDA device, replay repeated transformer forward shapes as CUDA graphs");
ABSL_FLAG(std::string, trace_out, "",
          "also write every request's transformer forwards (model, batch, new tokens, context, "
          "graph) and phase times as JSON lines here, for tools/gpu/project.py");

namespace mulo {
namespace {

using engine::DecodingMethod;

struct Config {
  std::string name;
  std::string group;  // "main" or the sweep axis
  std::shared_ptr<const DecodingMethod> method;
  double tau = 0, radius = 0, pooling_k = 0, draft_rows = 0;
  std::string rejection, prefix;  // MuLo-SD rows only
};

struct Row {
  Config config;
  int n = 0, pass = 0;
  double seconds = 0, target_forwards = 0, draft_forwards = 0, drafted = 0, accepted = 0,
         tokens = 0, resampled = 0;
  std::array<double, engine::kNumPhases> phase_seconds{};
};

Config Mulo(const std::string& name, const std::string& group, double tau, int64_t radius,
            engine::Rejection rejection, int64_t k, int64_t draft_rows = 1,
            engine::DraftPrefix prefix = engine::DraftPrefix::kDownsampled) {
  engine::MuloOptions o;
  o.prefix = prefix;
  o.draft_rows = draft_rows;
  o.tau = tau;
  o.radius = radius;
  o.rejection = rejection;
  o.k = k;
  Config c{name,
           group,
           std::make_shared<engine::MuloDecoder>(o),
           tau,
           static_cast<double>(radius),
           static_cast<double>(k),
           static_cast<double>(draft_rows),
           rejection == engine::Rejection::kLocal ? "local" : "raster",
           prefix == engine::DraftPrefix::kDownsampled ? "downsampled" : "keep_drafted"};
  return c;
}

// The family's transformers by name, to label trace events.
std::string ModelName(const engine::ModelSet& family, const void* model) {
  if (model == family.target.get()) return "target";
  if (model == family.drafter.get()) return "drafter";
  if (model == family.chain.get()) return "chain";
  return "other";
}

// A main row's name: the method and the defaults it ran with.
std::string MethodLabel(const engine::MethodConfig& m) {
  if (m.name == "speculative") return absl::StrFormat("speculative (gamma %d)", m.speculative.gamma);
  if (m.name == "mulo") {
    return absl::StrFormat("mulo (tau %g, l %d, %s, k %d)", m.mulo.tau, m.mulo.radius,
                           m.mulo.rejection == engine::Rejection::kLocal ? "local" : "raster",
                           m.mulo.k);
  }
  return m.name;
}

int Run() {
  engine::LoadOptions load;
  const std::string device_name = absl::GetFlag(FLAGS_device);
  if (device_name != "cpu" && device_name != "cuda") {
    std::fprintf(stderr, "error: --device: expected cpu or cuda, got \"%s\"\n",
                 device_name.c_str());
    return 2;
  }
  load.device = torch::Device(device_name);
  const std::string dtype = absl::GetFlag(FLAGS_dtype);
  if (dtype == "bfloat16") {
    load.dtype = torch::kBFloat16;
  } else if (dtype != "float32") {
    std::fprintf(stderr, "error: --dtype: expected float32 or bfloat16, got \"%s\"\n",
                 dtype.c_str());
    return 2;
  }
  load.cuda_graphs = absl::GetFlag(FLAGS_cuda_graphs);
  auto inputs = bench::LoadFamilyInputs(absl::GetFlag(FLAGS_models), absl::GetFlag(FLAGS_prompts),
                                        absl::GetFlag(FLAGS_limit), absl::GetFlag(FLAGS_threads),
                                        load);
  if (!inputs) return 1;
  std::ofstream trace_file;
  if (const std::string trace_path = absl::GetFlag(FLAGS_trace_out); !trace_path.empty()) {
    const auto parent = std::filesystem::path(trace_path).parent_path();
    std::error_code ignored;
    if (!parent.empty()) std::filesystem::create_directories(parent, ignored);
    trace_file.open(trace_path);
    if (!trace_file) {
      std::fprintf(stderr, "error: --trace_out: cannot write %s\n", trace_path.c_str());
      return 2;
    }
  }
  const engine::ModelSet* family = &inputs->family;
  const auto* prompts = &inputs->prompts;
  const size_t count = prompts->size();
  using engine::Rejection;
  // The main rows: ar first (the baseline), then each --methods entry at its registry defaults.
  std::vector<std::string> wanted = absl::GetFlag(FLAGS_methods);
  wanted.erase(std::remove(wanted.begin(), wanted.end(), "ar"), wanted.end());
  wanted.insert(wanted.begin(), "ar");
  std::vector<Config> configs;
  for (const std::string& name : wanted) {
    engine::MethodConfig method;
    method.name = name;
    auto made = engine::MakeMethod(method, *family);
    if (!made.ok()) {
      std::fprintf(stderr, "error: --methods: %s\n", made.status().ToString().c_str());
      return 2;
    }
    configs.push_back({MethodLabel(method), "main", *made});
    if (name == "mulo") {
      const auto& o = method.mulo;
      Config& c = configs.back();
      c.tau = o.tau;
      c.radius = static_cast<double>(o.radius);
      c.pooling_k = static_cast<double>(o.k);
      c.draft_rows = static_cast<double>(o.draft_rows);
      c.rejection = o.rejection == Rejection::kLocal ? "local" : "raster";
      c.prefix = o.prefix == engine::DraftPrefix::kDownsampled ? "downsampled" : "keep_drafted";
    }
  }
  const auto groups = absl::GetFlag(FLAGS_sweep_groups);
  for (const std::string& g : groups) {
    if (std::find(SweepAxes().begin(), SweepAxes().end(), g) == SweepAxes().end()) {
      std::fprintf(stderr, "error: --sweep_groups: unknown axis \"%s\" (%s)\n", g.c_str(),
                   absl::StrJoin(SweepAxes(), ", ").c_str());
      return 2;
    }
  }
  auto sweeping = [&](const std::string& group) {
    return absl::GetFlag(FLAGS_sweep) &&
           std::find(groups.begin(), groups.end(), group) != groups.end();
  };
  if (sweeping("tau")) {
    for (double tau : {1e-5, 1e-4, 1e-3, 1e-2}) {
      for (Rejection rej : {Rejection::kLocal, Rejection::kRaster}) {
        configs.push_back(Mulo(
            absl::StrFormat("mulo tau %g %s", tau, rej == Rejection::kLocal ? "local" : "raster"),
            "tau x rejection", tau, 3, rej, 1000));
      }
    }
  }
  if (sweeping("radius")) {
    for (int64_t radius : {0, 1}) {
      configs.push_back(Mulo(absl::StrFormat("mulo radius %d", radius), "radius", 1e-4, radius,
                             Rejection::kLocal, 1000));
    }
  }
  if (sweeping("pooling")) {
    configs.push_back(Mulo("mulo no pooling (k 1)", "pooling", 1e-4, 3, Rejection::kLocal, 1));
  }
  if (sweeping("draft_rows")) {
    // More drafter rows per step: fewer verify forwards and drafter cache refreshes, longer
    // stretches drafted without the target's correction.
    for (int64_t rows : {2, 4}) {
      configs.push_back(Mulo(absl::StrFormat("mulo draft_rows %d", rows), "draft rows", 1e-4, 3,
                             Rejection::kLocal, 1000, rows));
    }
  }
  if (sweeping("bounds")) {
    // The two ends of the acceptance range: tau = 0 accepts every draft, so its time is
    // MuLo-SD's fixed cost (drafting, up/down-sampling, verification); tau > 1 accepts none
    // and re-samples every token with the target on top of that fixed cost.
    configs.push_back(Mulo("mulo tau 0 (accept all)", "bounds", 0, 3, Rejection::kLocal, 1000));
    configs.push_back(Mulo("mulo tau 2 (accept none)", "bounds", 2, 3, Rejection::kLocal, 1000));
  }
  if (sweeping("prefix")) {
    // The drafter continues from its own tokens where U_r of them was committed unchanged,
    // instead of D_r of the committed rows (DraftPrefix::kKeepDrafted; not the paper's).
    for (double tau : {0.0, 1e-5, 1e-4, 1e-3}) {
      configs.push_back(Mulo(absl::StrFormat("mulo keep-drafted tau %g", tau), "prefix", tau, 3,
                             Rejection::kLocal, 1000, 1, engine::DraftPrefix::kKeepDrafted));
    }
  }
  synth::SynthEval judge;
  engine::NullProgressSink sink;
  engine::CancelToken cancel;
  std::vector<Row> rows;
  for (const Config& config : configs) rows.push_back(Row{config});
  const int64_t n_tokens = family->target->config().num_image_tokens();
  const int64_t n_draft = family->drafter ? family->drafter->config().num_image_tokens() : 0;
  // Interleave methods per prompt so slow drifts of the machine hit every
  // method alike.
  for (size_t i = 0; i < count; ++i) {
    const auto& entry = (*prompts)[i];
    engine::SamplingParams sampling;
    sampling.cfg_scale = family->default_cfg_scale;
    sampling.temperature = absl::GetFlag(FLAGS_temperature);
    sampling.seed = absl::GetFlag(FLAGS_seed) + static_cast<uint64_t>(entry.id);
    for (Row& row : rows) {
      engine::ForwardTrace trace;
      auto result = engine::GenerateImage(*row.config.method, *family, entry.prompt, sampling,
                                          sink, cancel,
                                          trace_file.is_open() ? &trace : nullptr);
      if (!result.ok()) {
        std::fprintf(stderr, "error (%s, prompt %d): %s\n", row.config.name.c_str(), entry.id,
                     result.status().ToString().c_str());
        return 1;
      }
      cv::Mat image = bench::ToRgbMat(result->image);
      auto verdict = judge.Evaluate(entry.prompt, image);
      const auto& s = result->stats;
      ++row.n;
      row.pass += verdict.ok() && verdict->pass;
      row.seconds += s.total_seconds;
      row.target_forwards += s.target_forward_passes;
      row.draft_forwards += s.draft_forward_passes;
      row.drafted += s.drafted_tokens;
      row.accepted += s.accepted_tokens;
      row.tokens += s.tokens;
      row.resampled += s.resampled_tokens;
      for (int p = 0; p < engine::kNumPhases; ++p) row.phase_seconds[p] += s.phase_seconds[p];
      if (trace_file.is_open()) {
        nlohmann::json line = {{"method", row.config.name},
                               {"prompt", entry.id},
                               {"seconds", s.total_seconds},
                               {"tokens", s.tokens}};
        for (int p = 0; p < engine::kNumPhases; ++p) {
          line["phases"][engine::PhaseName(static_cast<engine::Phase>(p))] = s.phase_seconds[p];
        }
        line["forwards"] = nlohmann::json::array();
        for (const engine::ForwardEvent& e : trace) {
          line["forwards"].push_back(
              {ModelName(*family, e.model), e.batch, e.new_tokens, e.context, e.graph});
        }
        trace_file << line.dump() << "\n";
      }
    }
    std::fprintf(stderr, "\r[%zu/%zu prompts]", i + 1, count);
  }
  std::fprintf(stderr, "\n");
  const Row& ar = rows[0];
  const std::string dir = absl::GetFlag(FLAGS_out_dir);
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  std::ofstream md(dir + "/methods.md"), csv(dir + "/methods.csv"), sweep;
  if (absl::GetFlag(FLAGS_sweep)) sweep.open(dir + "/sweep.csv");
  const std::string header = absl::StrFormat(
      "%zu held-out prompts, seeds %d.., temperature %.2f, cfg %.2f, %d torch "
      "thread(s), %s %s%s; "
      "%d target tokens, %d drafter tokens per image\n\n",
      count, absl::GetFlag(FLAGS_seed), absl::GetFlag(FLAGS_temperature), family->default_cfg_scale,
      absl::GetFlag(FLAGS_threads), device_name, dtype,
      load.device.is_cuda() ? (load.cuda_graphs ? " with CUDA graphs" : " eager") : "", n_tokens,
      n_draft);
  md << header
     << "| method | s / image | speedup vs ar | step compression | acceptance "
        "| target fwd | "
        "draft fwd | S_T | SynthEval | delta vs ar |\n"
     << "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  csv << "method,group,seconds_per_image,speedup,step_compression,acceptance,"
         "target_forwards,"
         "draft_forwards,theoretical_speedup,syntheval,syntheval_delta,tau,"
         "radius,k,rejection,draft_rows,prefix\n";
  for (const Row& row : rows) {
    const double sec = row.seconds / row.n, ar_sec = ar.seconds / ar.n;
    const double acceptance = row.drafted > 0 ? row.accepted / row.drafted : 0;
    const bool is_mulo = row.config.name.rfind("mulo", 0) == 0;
    const double st = is_mulo ? engine::TheoreticalSpeedup(acceptance, n_tokens, n_draft) : 0;
    const double score = 100.0 * row.pass / row.n, ar_score = 100.0 * ar.pass / ar.n;
    const std::string line = absl::StrFormat(
        "| %s | %.3f | %.2fx | %.2f | %s | %.1f | %.1f | %s | %.1f%% | %+.1f "
        "|\n",
        row.config.name, sec, ar_sec / sec, row.tokens / row.target_forwards,
        row.drafted > 0 ? absl::StrFormat("%.3f", acceptance) : "-", row.target_forwards / row.n,
        row.draft_forwards / row.n, is_mulo ? absl::StrFormat("%.2f", st) : "-", score,
        score - ar_score);
    const std::string csv_line = absl::StrFormat(
        "\"%s\",%s,%.4f,%.4f,%.4f,%.4f,%.2f,%.2f,%.4f,%.2f,%.2f,%g,%g,%g,%s,%g,%s\n", row.config.name,
        row.config.group, sec, ar_sec / sec, row.tokens / row.target_forwards, acceptance,
        row.target_forwards / row.n, row.draft_forwards / row.n, st, score, score - ar_score,
        row.config.tau, row.config.radius, row.config.pooling_k, row.config.rejection,
        row.config.draft_rows, row.config.prefix);
    md << line;
    csv << csv_line;
    if (sweep.is_open() && row.config.group != "main") sweep << csv_line;
    std::fputs(line.c_str(), stdout);
  }
  // Where the time goes: the numbers that explain a speedup (or its absence).
  std::string phases =
      "\nmean seconds per image by phase (and re-sampled "
      "tokens per image)\n\n| method |";
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
  md << phases;
  std::fputs(phases.c_str(), stdout);
  std::fputs(header.c_str(), stdout);
  std::printf("\nwrote %s/methods.md and methods.csv%s\n", dir.c_str(),
              sweep.is_open() ? " and sweep.csv" : "");
  return 0;
}

}  // namespace
}  // namespace mulo

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "decoding methods side by side on the bundled family\n  --methods: implemented methods "
      "of " + mulo::engine::MethodList());
  absl::ParseCommandLine(argc, argv);
  return mulo::Run();
}
