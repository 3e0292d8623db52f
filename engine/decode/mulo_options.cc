#include "engine/decode/mulo_options.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace mulo::engine {

const char* DraftPrefixName(DraftPrefix prefix) {
  switch (prefix) {
    case DraftPrefix::kDownsampled: return "downsampled";
    case DraftPrefix::kKeepDrafted: return "keep_drafted";
    case DraftPrefix::kPatch: return "patch";
    case DraftPrefix::kOwn: return "own";
  }
  return "unknown";
}

MuloOptions PaperMuloOptions() { return MuloOptions(); }

Status ValidateMuloOptions(const MuloOptions& o) {
  if (!(o.tau >= 0.0) || !std::isfinite(o.tau)) {
    return InvalidArgumentError("mulo.tau: must be a finite number >= 0");
  }
  MULO_RETURN_IF_ERROR(o.pooling.Validate("mulo"));
  if (o.radius < 0) return InvalidArgumentError("mulo.radius: must be >= 0");
  if (o.draft_rows < 1) return InvalidArgumentError("mulo.draft_rows: must be >= 1");
  if (o.parallel_radius < 0) {
    return InvalidArgumentError("mulo.parallel_radius: must be >= 0");
  }
  if (o.zipar_window < 0) return InvalidArgumentError("mulo.zipar_window: must be >= 0");
  if (o.resample_window < 1) return InvalidArgumentError("mulo.resample_window: must be >= 1");
  if (o.draft_cfg_scale &&
      !(*o.draft_cfg_scale >= 0.0 && *o.draft_cfg_scale <= 100.0)) {
    return InvalidArgumentError("mulo.draft_cfg_scale: must be in [0, 100]");
  }
  if (o.draft_temperature &&
      !(*o.draft_temperature >= 0.0 && *o.draft_temperature <= 100.0)) {
    return InvalidArgumentError("mulo.draft_temperature: must be in [0, 100]");
  }
  return OkStatus();
}

}  // namespace mulo::engine
