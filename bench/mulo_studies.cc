#include "bench/mulo_studies.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "engine/decode/option_text.h"

namespace mulo::bench {
namespace {

using engine::Rejection;

// MuLo-SD with the paper's settings but these.
MuloRow Paper(const std::string& name, const std::string& group, double tau, int64_t radius,
              Rejection rejection, int64_t k, int64_t draft_rows = 1,
              engine::DraftPrefix prefix = engine::DraftPrefix::kDownsampled) {
  engine::MuloOptions o = engine::PaperMuloOptions();
  o.prefix = prefix;
  o.draft_rows = draft_rows;
  o.tau = tau;
  o.radius = radius;
  o.rejection = rejection;
  o.pooling.k = k;
  return {name, group, o};
}

}  // namespace

nlohmann::json MuloJson(const engine::MuloOptions& o) {
  engine::MethodConfig config;
  config.mulo = o;
  return engine::OptionsJson(*engine::FindMethod("mulo"), config);
}

std::vector<MuloRow> MuloAblationRows(const engine::MuloOptions& family) {
  const engine::MuloOptions paper = engine::PaperMuloOptions();
  std::vector<MuloRow> rows = {{"mulo paper preset", "ablation", paper}};
  auto without = [&](const std::string& what, auto revert) {
    engine::MuloOptions o = family;
    revert(o);
    if (MuloJson(o) != MuloJson(family)) {
      rows.push_back({"mulo default, " + what + " as the paper", "ablation", o});
    }
  };
  without("prefix", [&](auto& o) { o.prefix = paper.prefix; });
  without("pooling", [&](auto& o) { o.pooling = paper.pooling; });
  without("radius", [&](auto& o) { o.radius = paper.radius; });
  without("drafter guidance", [&](auto& o) {
    o.draft_cfg_scale = paper.draft_cfg_scale;
    o.draft_temperature = paper.draft_temperature;
  });
  without("tau", [&](auto& o) { o.tau = paper.tau; });
  without("draft rows", [&](auto& o) { o.draft_rows = paper.draft_rows; });
  without("rejection", [&](auto& o) { o.rejection = paper.rejection; });
  without("re-sampling order", [&](auto& o) {
    o.resample = paper.resample;
    o.parallel_radius = paper.parallel_radius;
  });
  return rows;
}

engine::StatusOr<std::vector<MuloRow>> MuloGridRows(const std::string& path,
                                                    const engine::MethodConfig& defaults) {
  std::ifstream in(path);
  const nlohmann::json grid = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!grid.is_array()) {
    return engine::InvalidArgumentError("--mulo_grid: " + path + " is not a JSON array");
  }
  std::vector<MuloRow> rows;
  for (size_t i = 0; i < grid.size(); ++i) {
    nlohmann::json entry = grid[i];
    const std::string base = entry.is_object() ? entry.value("base", "paper") : "";
    if (base != "paper" && base != "family") {
      return engine::InvalidArgumentError(
          absl::StrFormat("--mulo_grid: entry %d: base must be paper or family", i));
    }
    const bool named = entry.is_object() && entry.contains("name") && entry["name"].is_string();
    const std::string label =
        named ? entry["name"].get<std::string>() : absl::StrFormat("mulo grid %d", i);
    if (entry.is_object()) {
      entry.erase("base");
      entry.erase("name");
    }
    engine::MethodConfig options = defaults;
    if (base == "paper") options.mulo = engine::PaperMuloOptions();
    MULO_RETURN_IF_ERROR(engine::ApplyOptionsJson(
        *engine::FindMethod("mulo"), entry, absl::StrFormat("--mulo_grid entry %d", i), options));
    MULO_RETURN_IF_ERROR(engine::ValidateMuloOptions(options.mulo));
    rows.push_back({label, "grid", options.mulo});
  }
  return rows;
}

const std::vector<std::string>& MuloSweepAxes() {
  static const auto* axes =
      new std::vector<std::string>({"tau", "radius", "pooling", "draft_rows", "bounds", "prefix"});
  return *axes;
}

engine::StatusOr<std::vector<MuloRow>> MuloSweepRows(const std::vector<std::string>& axes) {
  for (const std::string& axis : axes) {
    if (std::find(MuloSweepAxes().begin(), MuloSweepAxes().end(), axis) == MuloSweepAxes().end()) {
      return engine::InvalidArgumentError("--sweep_groups: unknown axis \"" + axis + "\" (" +
                                          absl::StrJoin(MuloSweepAxes(), ", ") + ")");
    }
  }
  auto sweeping = [&](const std::string& axis) {
    return std::find(axes.begin(), axes.end(), axis) != axes.end();
  };
  std::vector<MuloRow> rows;
  if (sweeping("tau")) {
    for (double tau : {1e-5, 1e-4, 1e-3, 1e-2}) {
      for (Rejection rej : {Rejection::kLocal, Rejection::kRaster}) {
        rows.push_back(Paper(
            absl::StrFormat("mulo tau %g %s", tau, rej == Rejection::kLocal ? "local" : "raster"),
            "tau x rejection", tau, 3, rej, 1000));
      }
    }
  }
  if (sweeping("radius")) {
    for (int64_t radius : {0, 1}) {
      rows.push_back(Paper(absl::StrFormat("mulo radius %d", radius), "radius", 1e-4, radius,
                           Rejection::kLocal, 1000));
    }
  }
  if (sweeping("pooling")) {
    rows.push_back(Paper("mulo no pooling (k 0)", "pooling", 1e-4, 3, Rejection::kLocal, 0));
  }
  if (sweeping("draft_rows")) {
    // More drafter rows per step: fewer verify forwards and drafter cache refreshes, longer
    // stretches drafted without the target's correction.
    for (int64_t draft_rows : {2, 4}) {
      rows.push_back(Paper(absl::StrFormat("mulo draft_rows %d", draft_rows), "draft rows", 1e-4,
                           3, Rejection::kLocal, 1000, draft_rows));
    }
  }
  if (sweeping("bounds")) {
    // The two ends of the acceptance range: tau = 0 accepts every draft, so its time is
    // MuLo-SD's fixed cost (drafting, up/down-sampling, verification); tau > 1 accepts none
    // and re-samples every token with the target on top of that fixed cost.
    rows.push_back(Paper("mulo tau 0 (accept all)", "bounds", 0, 3, Rejection::kLocal, 1000));
    rows.push_back(Paper("mulo tau 2 (accept none)", "bounds", 2, 3, Rejection::kLocal, 1000));
  }
  if (sweeping("prefix")) {
    // The drafter continues from its own tokens where U_r of them was committed unchanged,
    // instead of D_r of the committed rows (DraftPrefix::kKeepDrafted; not the paper's).
    for (double tau : {0.0, 1e-5, 1e-4, 1e-3}) {
      rows.push_back(Paper(absl::StrFormat("mulo keep-drafted tau %g", tau), "prefix", tau, 3,
                           Rejection::kLocal, 1000, 1, engine::DraftPrefix::kKeepDrafted));
    }
  }
  return rows;
}

}  // namespace mulo::bench
