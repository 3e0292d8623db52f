#include "engine/decode/graphed_shapes.h"

#include <utility>

#include "engine/decode/peanut_shapes.h"

namespace mulo::engine {

KvPools::GraphedShapes GraphedShapesOf(const MethodConfig& config, const ModelSet& models) {
  KvPools::GraphedShapes shapes;
  shapes.chain = config.speculative.gamma;
  shapes.sjd_window = config.sjd.window;
  shapes.gsd_window = config.gsd.window;
  shapes.gsd_group = config.gsd.group.size;
  shapes.mc_sjd_window = config.mc_sjd.window;
  shapes.sjd_pac_window = config.sjd_pac.window;
  shapes.sjd_pac_width = config.sjd_pac.width;
  shapes.sjd_pac_depth = config.sjd_pac.depth;
  shapes.eagle_tree = config.eagle.dynamic;
  shapes.peanut_trees = PeanutShapes::Reachable(config.peanut.shape, config.peanut.tree);
  shapes.lantern_k = config.lantern.k;
  shapes.lantern_plus_plus_k = config.lantern_plus_plus.k;
  const MuloOptions& mulo = config.mulo;
  shapes.mulo_draft_rows = mulo.draft_rows;
  // MuLo-SD's verification graphs serve steps that re-sample from the verify forward alone.
  if (mulo.resample == ResampleOrder::kParallel && mulo.parallel_radius == 0 &&
      models.target != nullptr && models.drafter != nullptr && models.upsampler != nullptr) {
    MuloVerifyGraphs::Shape verify;
    verify.grid = models.target->grid_size();
    verify.drafts = mulo.draft_rows * models.upsampler->config().factor * verify.grid;
    verify.radius = mulo.radius;
    verify.rejection = mulo.rejection;
    verify.pooling = mulo.pooling;
    // The drafter's rows ride along (drawn by its row graphs or ZipAR's wavefront).
    verify.carried = mulo.draft_rows * models.drafter->grid_size();
    // A drafter that continues from its own tokens drafts inside the same replay (step graphs).
    verify.draft = mulo.zipar_window == 0 && mulo.prefix == DraftPrefix::kOwn;
    // Otherwise the drafter draws its rows apart, and U_r runs in the replay (Shape::upsample).
    verify.upsample = !verify.draft;
    verify.filters = true;  // top-k / top-p requests (LlamaGen's published settings) too
    shapes.mulo_verify = verify;
  }
  return shapes;
}

StatusOr<KvPools::Family> PoolFamily(std::string name, const ModelSet& models) {
  MULO_ASSIGN_OR_RETURN(const MethodConfig config, DefaultMethodConfig(kBaselineMethod, models));
  return KvPools::Family(std::move(name), &models, GraphedShapesOf(config, models));
}

}  // namespace mulo::engine
