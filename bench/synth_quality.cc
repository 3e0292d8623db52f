// Quality of the bundled family, judged by SynthEval over the held-out prompts: AR decoding of
// the target at the family's default CFG, and the low-resolution drafter alone at its own
// resolution. Prints a markdown table and writes an image grid of the first 16 prompts.
//
//   bazel run //bench:synth_quality -- --models=$PWD/models/synth
//       --prompts=$PWD/models/synth/heldout_prompts.jsonl --grid_out=/tmp/grid.png
#include <torch/types.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "bench/family_inputs.h"
#include "bench/rgb_mat.h"
#include "engine/decode/ar.h"
#include "engine/decode/generate.h"
#include "server/engine_status.h"
#include "synth/heldout.h"
#include "synth/synth_eval.h"

ABSL_FLAG(std::string, models, "models/synth", "model family directory (family.json)");
ABSL_FLAG(std::string, prompts, "models/synth/heldout_prompts.jsonl", "held-out prompt set");
ABSL_FLAG(int, limit, 0, "use the first N prompts (0 = all)");
ABSL_FLAG(uint64_t, seed, 0, "prompt i uses seed + i");
ABSL_FLAG(double, cfg_scale, -1, "CFG scale (-1 = the family's default)");
ABSL_FLAG(double, temperature, 1.0, "sampling temperature (0 = greedy)");
ABSL_FLAG(int, top_k, 0, "top-k (0 = off)");
ABSL_FLAG(int, threads, 1, "torch intra-op threads");
ABSL_FLAG(bool, target, true, "evaluate the target (false: only the drafter rows)");
ABSL_FLAG(bool, drafter, true, "also evaluate the drafter alone at its resolution");
ABSL_FLAG(bool, upsampled_drafter, true,
          "with the drafter: also judge U_r of its whole sample at the target's resolution "
          "(MuLo-SD's drafts with nothing accepted or rejected, outside its D_r feedback loop)");
ABSL_FLAG(std::string, grid_out, "", "write a 4x4 grid of the first 16 target images here");
ABSL_FLAG(std::string, tokens_out, "",
          "also write each target image's tokens here, one JSON line per prompt (to compare "
          "with the PyTorch reference or between runs)");
ABSL_FLAG(std::string, json_out, "", "also write the results as JSON here (for the model card)");

namespace mulo {
namespace {

using engine::ModelSet;

struct Tally {
  int n = 0, pass = 0, color = 0, shape = 0, size = 0, position = 0, background = 0;
  double seconds = 0;
  void Add(const synth::Verdict& v, double s) {
    ++n;
    pass += v.pass;
    color += v.color;
    shape += v.shape;
    size += v.size;
    position += v.position;
    background += v.background;
    seconds += s;
  }
  std::string Json(int64_t resolution) const {
    auto pct = [&](int k) { return n ? 100.0 * k / n : 0.0; };
    char buf[512];
    std::snprintf(buf, sizeof(buf),
                  "{\"resolution\": %ld, \"prompts\": %d, \"pass\": %.4f, \"colour\": %.4f, "
                  "\"shape\": %.4f, \"size\": %.4f, \"position\": %.4f, "
                  "\"background\": %.4f, \"seconds_per_image\": %.4f}",
                  resolution, n, pct(pass), pct(color), pct(shape), pct(size), pct(position),
                  pct(background), n ? seconds / n : 0.0);
    return buf;
  }
  void Print(const char* name, int64_t resolution) const {
    auto pct = [&](int k) { return n ? 100.0 * k / n : 0.0; };
    std::printf(
        "| %s | %ldx%ld | %d | **%.1f%%** | %.1f%% | %.1f%% | %.1f%% | %.1f%% | %.1f%% | %.2f |\n",
        name, resolution, resolution, n, pct(pass), pct(color), pct(shape), pct(size),
        pct(position), pct(background), n ? seconds / n : 0.0);
  }
};

void WriteGrid(const std::vector<cv::Mat>& images, const std::vector<std::string>& captions,
               const std::string& path) {
  const int scale = 4, cell = 64 * scale, text_h = 58, cols = 4;
  const int rows = (static_cast<int>(images.size()) + cols - 1) / cols;
  cv::Mat grid(rows * (cell + text_h), cols * cell, CV_8UC3, cv::Scalar(255, 255, 255));
  for (size_t i = 0; i < images.size(); ++i) {
    const int r = static_cast<int>(i) / cols, c = static_cast<int>(i) % cols;
    cv::Mat big, bgr;
    cv::resize(images[i], big, cv::Size(cell, cell), 0, 0, cv::INTER_NEAREST);
    cv::cvtColor(big, bgr, cv::COLOR_RGB2BGR);
    bgr.copyTo(grid(cv::Rect(c * cell, r * (cell + text_h), cell, cell)));
    // Wrap the caption over up to four short lines under the image.
    constexpr size_t kChars = 31;
    std::string text = captions[i];
    for (int line = 0; line < 4 && !text.empty(); ++line) {
      std::string part = text.substr(0, kChars);
      if (text.size() > kChars && part.rfind(' ') != std::string::npos) {
        part = part.substr(0, part.rfind(' '));
      }
      text = text.substr(std::min(text.size(), part.size() + 1));
      cv::putText(grid, part, cv::Point(c * cell + 2, r * (cell + text_h) + cell + 12 + 13 * line),
                  cv::FONT_HERSHEY_PLAIN, 0.8, cv::Scalar(0, 0, 0), 1, cv::LINE_AA);
    }
  }
  cv::imwrite(path, grid);
}

// One generation and SynthEval's verdict on it.
struct Judged {
  engine::GenerateResult generated;
  cv::Mat image;
  synth::Verdict verdict;
};

absl::StatusOr<Judged> GenerateAndJudge(const engine::ArDecoder& ar,
                                        const ModelSet& models,
                                        const std::string& prompt,
                                        const engine::SamplingParams& sampling,
                                        const synth::SynthEval& judge) {
  engine::NullProgressSink sink;
  engine::CancelToken cancel;
  auto generated = engine::GenerateImage(ar, models, prompt, sampling, sink, cancel);
  if (!generated.ok()) return server::ToAbsl(generated.status());
  Judged judged{*std::move(generated), cv::Mat(), {}};
  judged.image = bench::ToRgbMat(judged.generated.image);
  auto verdict = judge.Evaluate(prompt, judged.image);
  if (!verdict.ok()) return verdict.status();
  judged.verdict = *verdict;
  return judged;
}

// SynthEval's verdict on U_r(drafter tokens) decoded at the target's resolution.
absl::StatusOr<synth::Verdict> JudgeUpsampled(const ModelSet& family,
                                              const std::vector<int32_t>& drafter_tokens,
                                              const std::string& prompt,
                                              const synth::SynthEval& judge) {
  const int64_t small = family.drafter->grid_size();
  const int64_t grid = family.target->grid_size();
  auto up = family.upsampler->Apply(
      std::vector<int64_t>(drafter_tokens.begin(), drafter_tokens.end()), small, small);
  if (!up.ok()) return server::ToAbsl(up.status());
  auto rgb = family.vq->DecodeToRgb(std::vector<int32_t>(up->begin(), up->end()), grid, grid);
  if (!rgb.ok()) return server::ToAbsl(rgb.status());
  return judge.Evaluate(prompt, bench::ToRgbMat(*rgb));
}

int ReportError(const synth::HeldoutEntry& entry, const absl::Status& status) {
  std::fprintf(stderr, "error on prompt %d: %s\n", entry.id, status.ToString().c_str());
  return 1;
}

// The token ids of one prompt's target image, as a JSON line.
void WriteTokensLine(int64_t id, const std::vector<int32_t>& tokens, std::ofstream& out) {
  out << "{\"id\": " << id << ", \"tokens\": [";
  for (size_t t = 0; t < tokens.size(); ++t) out << (t ? ", " : "") << tokens[t];
  out << "]}\n";
}

// The three rows a run fills: the target, the drafter alone, and U_r of the drafter's sample.
struct Tallies {
  bool with_target = false, with_drafter = false, with_upsampled = false;
  Tally target, drafter, upsampled;
  int64_t target_size = 0, drafter_size = 0;  // pixels per side
};

void PrintTable(const Tallies& t, size_t count, const engine::SamplingParams& sampling) {
  std::printf(
      "SynthEval over %zu held-out prompts (%s), ar decoding, cfg %.2f, temperature %.2f, "
      "seeds %lu..\n\n",
      count, absl::GetFlag(FLAGS_prompts).c_str(), sampling.cfg_scale, sampling.temperature,
      absl::GetFlag(FLAGS_seed));
  std::printf(
      "| model | image | prompts | pass | colour | shape | size | position | background | s / "
      "image |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  if (t.with_target) t.target.Print("target", t.target_size);
  if (t.with_drafter) t.drafter.Print("drafter (alone)", t.drafter_size);
  if (t.with_upsampled) t.upsampled.Print("U_r(drafter sample)", t.target_size);
}

void WriteJson(const Tallies& t, const engine::SamplingParams& sampling, const std::string& path) {
  std::ofstream json(path);
  json << "{\"cfg_scale\": " << sampling.cfg_scale << ", \"temperature\": " << sampling.temperature;
  if (t.with_target) json << ", \"target\": " << t.target.Json(t.target_size);
  if (t.with_drafter) json << ", \"drafter\": " << t.drafter.Json(t.drafter_size);
  if (t.with_upsampled) json << ", \"upsampled_drafter\": " << t.upsampled.Json(t.target_size);
  json << "}\n";
}

int Run() {
  auto inputs = bench::LoadFamilyInputs(absl::GetFlag(FLAGS_models), absl::GetFlag(FLAGS_prompts),
                                        absl::GetFlag(FLAGS_limit), absl::GetFlag(FLAGS_threads));
  if (!inputs) return 1;
  const ModelSet& family = inputs->family;
  const auto* prompts = &inputs->prompts;
  const size_t count = prompts->size();
  engine::SamplingParams sampling;
  sampling.cfg_scale = absl::GetFlag(FLAGS_cfg_scale) >= 0 ? absl::GetFlag(FLAGS_cfg_scale)
                                                           : family.default_cfg_scale;
  sampling.temperature = absl::GetFlag(FLAGS_temperature);
  sampling.top_k = absl::GetFlag(FLAGS_top_k);

  ModelSet drafter_family = family;  // the drafter decoding on its own, at its own resolution
  drafter_family.target = family.drafter;
  Tallies t;
  t.with_drafter = absl::GetFlag(FLAGS_drafter) && family.drafter != nullptr;
  t.with_upsampled = t.with_drafter && absl::GetFlag(FLAGS_upsampled_drafter) &&
                     family.upsampler != nullptr && family.vq != nullptr;
  t.with_target = absl::GetFlag(FLAGS_target);
  t.target_size = family.ImageSize();
  if (t.with_drafter) t.drafter_size = drafter_family.ImageSize();

  synth::SynthEval judge;
  engine::ArDecoder ar;
  std::vector<cv::Mat> grid_images;
  std::vector<std::string> grid_captions;
  std::ofstream tokens_out;
  if (!absl::GetFlag(FLAGS_tokens_out).empty()) tokens_out.open(absl::GetFlag(FLAGS_tokens_out));
  std::fprintf(stderr, "evaluating %zu prompts (cfg %.2f, temperature %.2f)\n", count,
               sampling.cfg_scale, sampling.temperature);
  for (size_t i = 0; i < count; ++i) {
    const auto& entry = (*prompts)[i];
    sampling.seed = absl::GetFlag(FLAGS_seed) + static_cast<uint64_t>(entry.id);
    for (bool drafter : {false, true}) {
      if (drafter ? !t.with_drafter : !t.with_target) continue;
      const ModelSet& models = drafter ? drafter_family : family;
      auto judged = GenerateAndJudge(ar, models, entry.prompt, sampling, judge);
      if (!judged.ok()) return ReportError(entry, judged.status());
      const engine::GenerateResult& result = judged->generated;
      const synth::Verdict& verdict = judged->verdict;
      (drafter ? t.drafter : t.target).Add(verdict, result.stats.total_seconds);
      if (drafter && t.with_upsampled) {
        auto up_verdict = JudgeUpsampled(family, result.tokens, entry.prompt, judge);
        if (!up_verdict.ok()) return ReportError(entry, up_verdict.status());
        t.upsampled.Add(*up_verdict, 0);
      }
      if (!drafter && tokens_out.is_open()) WriteTokensLine(entry.id, result.tokens, tokens_out);
      if (!drafter && grid_images.size() < 16) {
        grid_images.push_back(judged->image);
        grid_captions.push_back((verdict.pass ? "[pass] " : "[fail] ") + entry.prompt);
      }
    }
    if ((i + 1) % 16 == 0 || i + 1 == count) {
      std::fprintf(stderr, "\r[%zu/%zu] target pass %d, drafter pass %d", i + 1, count,
                   t.target.pass, t.drafter.pass);
    }
  }
  std::fprintf(stderr, "\n");
  PrintTable(t, count, sampling);
  if (!absl::GetFlag(FLAGS_json_out).empty()) WriteJson(t, sampling, absl::GetFlag(FLAGS_json_out));
  if (!absl::GetFlag(FLAGS_grid_out).empty()) {
    WriteGrid(grid_images, grid_captions, absl::GetFlag(FLAGS_grid_out));
    std::printf("\nwrote %s\n", absl::GetFlag(FLAGS_grid_out).c_str());
  }
  return 0;
}

}  // namespace
}  // namespace mulo

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("SynthEval quality of the bundled family (target and drafter)");
  absl::ParseCommandLine(argc, argv);
  return mulo::Run();
}
