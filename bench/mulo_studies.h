// MuLo-SD's studies for methods_bench, beside the main rows every method gets: the ablation
// (the paper preset, then the family default with each setting that differs from the paper's
// put back, one at a time), a grid of option sets read from JSON, and the one-axis sweeps.
#ifndef MULO_BENCH_MULO_STUDIES_H_
#define MULO_BENCH_MULO_STUDIES_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/core/status.h"
#include "engine/decode/method_registry.h"
#include "engine/decode/mulo_options.h"

namespace mulo::bench {

// One MuLo-SD row: its label, its group (the study or the sweep axis) and its options.
struct MuloRow {
  std::string name;
  std::string group;
  engine::MuloOptions options;
};

// MuLo-SD's options as its spec writes them (OptionsJson): methods_bench's CSV columns, and
// how two option sets are told apart.
nlohmann::json MuloJson(const engine::MuloOptions& o);

// The ablation rows over the family's MuLo-SD defaults `family`.
std::vector<MuloRow> MuloAblationRows(const engine::MuloOptions& family);

// The option sets of the JSON file at `path` (methods_bench --mulo_grid): an array of objects
// with the keys of family.json's method_defaults.mulo, plus "name" (the row label) and "base":
// "paper" (default) or "family" (`defaults`, what unset keys take). INVALID_ARGUMENT naming the
// entry when one does not parse or is out of bounds.
engine::StatusOr<std::vector<MuloRow>> MuloGridRows(const std::string& path,
                                                    const engine::MethodConfig& defaults);

// The sweep's axes, in the order they run.
const std::vector<std::string>& MuloSweepAxes();

// The rows of the sweep axes `axes` (each one of MuloSweepAxes(); INVALID_ARGUMENT naming an
// unknown one), each MuLo-SD with the paper's settings but the axis'.
engine::StatusOr<std::vector<MuloRow>> MuloSweepRows(const std::vector<std::string>& axes);

}  // namespace mulo::bench

#endif  // MULO_BENCH_MULO_STUDIES_H_
