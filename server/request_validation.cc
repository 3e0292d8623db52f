#include "server/request_validation.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/decode/generate.h"
#include "engine/decode/method_registry.h"
#include "mulo/v1/method_names.h"
#include "server/client_text.h"

namespace mulo::server {
namespace {

absl::Status Invalid(absl::string_view field, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", problem));
}

// Whether `text` is well-formed UTF-8 (protobuf checks `string` fields too, but only in debug
// builds of some languages; we refuse explicitly with a field name).
bool IsValidUtf8(const std::string& text) {
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    size_t extra;
    if (c < 0x80) {
      extra = 0;
    } else if ((c >> 5) == 0x6) {
      extra = 1;
    } else if ((c >> 4) == 0xE) {
      extra = 2;
    } else if ((c >> 3) == 0x1E) {
      extra = 3;
    } else {
      return false;
    }
    if (i + extra >= text.size()) return false;
    for (size_t k = 1; k <= extra; ++k) {
      if ((static_cast<unsigned char>(text[i + k]) >> 6) != 0x2) return false;
    }
    i += extra + 1;
  }
  return true;
}

// EAGLE's tree parameters, as sent for eagle and lantern (unset fields keep the defaults; the
// engine checks the ranges).
void MapEagleParams(const v1::EagleParams& e, engine::EagleOptions* options) {
  options->static_tree = e.static_tree();
  if (e.has_total_tokens()) options->dynamic.total_tokens = e.total_tokens();
  if (e.has_depth()) options->dynamic.depth = e.depth();
  if (e.has_top_k()) options->dynamic.top_k = e.top_k();
}

// Puts the request's MuLo-SD fields over `options` (the family's defaults, or the paper's
// with the PAPER preset). Open proto3 enums carry unknown numbers through; they are refused
// rather than defaulted. Ranges are checked by the engine.
absl::Status MapMuloParams(const v1::MuloParams& m, engine::MuloOptions* options) {
  using P = v1::MuloParams;
  if (!P::Preset_IsValid(m.preset())) {
    return Invalid("mulo.preset", absl::StrCat(m.preset(), " is not FAMILY or PAPER"));
  }
  if (m.preset() == P::PAPER) *options = engine::PaperMuloOptions();
  if (m.has_tau()) options->tau = m.tau();
  if (m.has_k()) options->pooling.k = m.k();
  if (m.has_delta()) options->pooling.delta = m.delta();
  if (m.has_lambda()) options->pooling.lambda = m.lambda();
  switch (m.pooling()) {
    case P::POOLING_UNSPECIFIED: break;
    case P::ADDITIVE: options->pooling.kind = engine::Pooling::kAdditive; break;
    case P::MULTIPLICATIVE: options->pooling.kind = engine::Pooling::kMultiplicative; break;
    case P::NO_POOLING: options->pooling.kind = engine::Pooling::kNone; break;
    default:
      return Invalid("mulo.pooling", absl::StrCat(m.pooling(),
                                                  " is not ADDITIVE, MULTIPLICATIVE or NO_POOLING"));
  }
  if (m.has_radius()) options->radius = m.radius();
  if (m.has_draft_rows()) options->draft_rows = m.draft_rows();
  switch (m.rejection()) {
    case P::REJECTION_UNSPECIFIED: break;
    case P::LOCAL: options->rejection = engine::Rejection::kLocal; break;
    case P::RASTER: options->rejection = engine::Rejection::kRaster; break;
    default:
      return Invalid("mulo.rejection", absl::StrCat(m.rejection(), " is not LOCAL or RASTER"));
  }
  switch (m.draft_prefix()) {
    case P::DRAFT_PREFIX_UNSPECIFIED: break;
    case P::DOWNSAMPLED: options->prefix = engine::DraftPrefix::kDownsampled; break;
    case P::KEEP_DRAFTED: options->prefix = engine::DraftPrefix::kKeepDrafted; break;
    case P::PATCH: options->prefix = engine::DraftPrefix::kPatch; break;
    case P::OWN: options->prefix = engine::DraftPrefix::kOwn; break;
    default:
      return Invalid("mulo.draft_prefix",
                     absl::StrCat(m.draft_prefix(),
                                  " is not DOWNSAMPLED, KEEP_DRAFTED, PATCH or OWN"));
  }
  switch (m.resample()) {
    case P::RESAMPLE_ORDER_UNSPECIFIED: break;
    case P::SEQUENTIAL: options->resample = engine::ResampleOrder::kSequential; break;
    case P::PARALLEL: options->resample = engine::ResampleOrder::kParallel; break;
    case P::WAVEFRONT: options->resample = engine::ResampleOrder::kWavefront; break;
    default:
      return Invalid("mulo.resample",
                     absl::StrCat(m.resample(), " is not SEQUENTIAL, PARALLEL or WAVEFRONT"));
  }
  if (m.has_parallel_radius()) options->parallel_radius = m.parallel_radius();
  if (m.has_zipar_window()) options->zipar_window = m.zipar_window();
  if (m.has_resample_window()) options->resample_window = m.resample_window();
  if (m.has_draft_cfg_scale()) options->draft_cfg_scale = m.draft_cfg_scale();
  if (m.has_draft_temperature()) options->draft_temperature = m.draft_temperature();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ValidatedRequest> ValidateRequest(const v1::GenerateRequest& request,
                                                 const ModelRepository& repository) {
  ValidatedRequest out;
  out.request_id = request.request_id();
  if (out.request_id.size() > 128) return Invalid("request_id", "longer than 128 bytes");
  if (request.model().empty()) {
    return Invalid("model", absl::StrCat("required (loaded: ",
                                         absl::StrJoin(repository.Names(), ", "), ")"));
  }
  out.models = repository.Find(request.model());
  if (out.models == nullptr) {
    return absl::NotFoundError(absl::StrCat("model: ", Quoted(request.model()),
                                            " is not loaded (loaded: ",
                                            absl::StrJoin(repository.Names(), ", "), ")"));
  }
  out.model_name = request.model();
  const auto& target = out.models->target->config();

  // What to condition on: a prompt, precomputed features, TA-Tok ids or a class label.
  if (request.condition_size() > 0 && request.condition_tokens_size() > 0) {
    return Invalid("condition_tokens", "send either condition features or condition_tokens");
  }
  if (request.caption_length() != 0) {
    if (auto st = engine::CheckCaptionLength(target, request.caption_length()); !st.ok()) {
      return ToAbsl(st);  // "caption_length: ..." from the engine
    }
    if (request.condition_size() == 0) {
      return Invalid("caption_length", "applies to condition features; none were sent");
    }
    out.condition.caption_length = request.caption_length();
  }
  if (target.condition_mode == engine::ConditionMode::kClassLabel) {
    if (!request.has_class_label()) {
      return Invalid("class_label", absl::StrCat("required: this model draws one of ",
                                                 target.num_classes, " classes"));
    }
    if (request.condition_size() > 0 || request.condition_tokens_size() > 0) {
      return Invalid(request.condition_size() > 0 ? "condition" : "condition_tokens",
                     "this model takes class_label, not features or tokens");
    }
  }
  if (request.has_class_label()) {
    if (auto st = engine::CheckClassLabel(target, request.class_label()); !st.ok()) {
      return ToAbsl(st);  // "class_label: ..." from the engine
    }
    out.condition.class_label = request.class_label();
  } else if (request.condition_tokens_size() > 0) {
    out.condition.ta_tok_ids.assign(request.condition_tokens().begin(),
                                    request.condition_tokens().end());
    if (auto st = engine::CheckConditionTokens(*out.models, out.condition.ta_tok_ids);
        !st.ok()) {
      return ToAbsl(st);  // "condition_tokens: ..." from the engine
    }
  } else if (request.condition_size() > 0) {
    const int64_t want = target.cls_token_num * target.cond_dim;
    if (request.condition_size() != want) {
      return Invalid("condition", absl::StrCat(request.condition_size(), " floats, expected ",
                                               target.cls_token_num, " x ", target.cond_dim,
                                               " = ", want));
    }
    for (float x : request.condition()) {
      if (!std::isfinite(x)) return Invalid("condition", "contains NaN or infinity");
    }
    out.condition.features =
        torch::tensor(std::vector<float>(request.condition().begin(), request.condition().end()))
            .view({target.cls_token_num, target.cond_dim});
  } else {
    if (request.prompt().empty()) {
      return Invalid("prompt", "required (or send condition or condition_tokens)");
    }
    if (request.prompt().size() > kMaxPromptBytes) {
      return Invalid("prompt", absl::StrCat(request.prompt().size(), " bytes, more than ",
                                            kMaxPromptBytes));
    }
    if (!IsValidUtf8(request.prompt())) return Invalid("prompt", "is not valid UTF-8");
    if (out.models->conditioner == nullptr) {
      return Invalid("prompt", "this model has no text conditioner; send condition features");
    }
    auto tokens = out.models->conditioner->Tokenize(request.prompt());
    if (!tokens.ok()) return ToAbsl(tokens.status());  // "prompt: ..." from the engine
    out.prompt = request.prompt();
  }

  // Sampling: unset fields take the engine's defaults (the CFG scale: the family's); the
  // engine validates the ranges, naming the field.
  const auto& s = request.sampling();
  out.sampling.cfg_scale = s.has_cfg_scale() ? s.cfg_scale() : out.models->default_cfg_scale;
  if (s.has_temperature()) out.sampling.temperature = s.temperature();
  out.sampling.top_k = s.top_k();
  if (s.has_top_p()) out.sampling.top_p = s.top_p();
  out.sampling.seed = s.seed();
  if (auto st = engine::ValidateSamplingParams(out.sampling, target.vocab_size); !st.ok()) {
    return ToAbsl(st);
  }

  // Method: the proto's oneof mapped to the engine's options; the engine's registry checks
  // the name, the family's components and the option ranges.
  auto defaults = engine::DefaultMethodConfig(v1::RequestMethodName(request), *out.models);
  if (!defaults.ok()) return ToAbsl(defaults.status());
  engine::MethodConfig config = *std::move(defaults);
  if (request.has_speculative() && request.speculative().has_gamma()) {
    config.speculative.gamma = request.speculative().gamma();
  }
  if (request.has_mulo()) {
    if (absl::Status mapped = MapMuloParams(request.mulo(), &config.mulo); !mapped.ok()) {
      return mapped;
    }
  }
  if (request.has_eagle()) MapEagleParams(request.eagle(), &config.eagle);
  if (request.has_lantern()) {
    const v1::LanternParams& l = request.lantern();
    if (l.has_k()) config.lantern.k = l.k();
    if (l.has_delta()) config.lantern.delta = l.delta();
    if (l.has_tree()) MapEagleParams(l.tree(), &config.lantern.tree);
  }
  if (request.has_lantern_plus_plus()) {
    const v1::LanternPlusPlusParams& l = request.lantern_plus_plus();
    if (l.has_k()) config.lantern_plus_plus.k = l.k();
    if (l.has_lambda()) config.lantern_plus_plus.lambda = l.lambda();
  }
  if (request.has_peanut()) {
    const v1::PeanutParams& q = request.peanut();
    engine::PeanutOptions& shape = config.peanut.shape;
    if (q.has_beta()) shape.beta = q.beta();
    if (q.has_l_d()) shape.l_d = q.l_d();
    if (q.has_l_k()) shape.l_k = q.l_k();
    if (q.has_min_depth()) shape.min_depth = q.min_depth();
    if (q.has_max_depth()) shape.max_depth = q.max_depth();
    if (q.has_min_top_k()) shape.min_top_k = q.min_top_k();
    if (q.has_max_top_k()) shape.max_top_k = q.max_top_k();
    if (q.has_tree()) {
      if (q.tree().static_tree()) {
        return Invalid("peanut.tree.static_tree", "PEANUT adapts dynamic (EAGLE-2) trees only");
      }
      engine::EagleOptions tree;
      tree.dynamic = config.peanut.tree;
      MapEagleParams(q.tree(), &tree);
      config.peanut.tree = tree.dynamic;
    }
    switch (q.init()) {
      case v1::PeanutParams::INIT_UNSPECIFIED:
      case v1::PeanutParams::HORIZONTAL_REPEAT:
        shape.init = engine::PeanutInit::kHorizontalRepeat;
        break;
      case v1::PeanutParams::VERTICAL_REPEAT: shape.init = engine::PeanutInit::kVerticalRepeat; break;
      case v1::PeanutParams::RANDOM: shape.init = engine::PeanutInit::kRandom; break;
      default:
        return Invalid("peanut.init", absl::StrCat(q.init(), " is not HORIZONTAL_REPEAT, "
                                                              "VERTICAL_REPEAT or RANDOM"));
    }
    if (q.has_lantern_delta()) config.peanut.lantern_delta = q.lantern_delta();
  }
  if (request.has_sjd()) {
    const v1::SjdParams& j = request.sjd();
    if (j.has_window()) config.sjd.window = j.window();
    switch (j.init()) {
      case v1::SjdParams::INIT_UNSPECIFIED:
      case v1::SjdParams::RANDOM: config.sjd.init = engine::JacobiInit::kRandom; break;
      case v1::SjdParams::REPEAT_HORIZON: config.sjd.init = engine::JacobiInit::kRepeatHorizon; break;
      default: return Invalid("sjd.init", absl::StrCat(j.init(), " is not RANDOM or REPEAT_HORIZON"));
    }
  }
  if (request.has_gsd()) {
    const v1::GsdParams& g = request.gsd();
    if (g.has_window()) config.gsd.window = g.window();
    if (g.has_group_size()) config.gsd.group.size = g.group_size();
    if (g.has_max_probability_gap()) config.gsd.group.max_probability_gap = g.max_probability_gap();
    if (g.has_max_embedding_distance()) {
      config.gsd.group.max_embedding_distance = g.max_embedding_distance();
    }
  }
  if (request.has_zipar() && request.zipar().has_window()) {
    config.zipar.window = request.zipar().window();
  }
  // Methods without options here (ar, and those not implemented yet, which the registry
  // answers with UNIMPLEMENTED) need nothing but their name.
  auto decoder = engine::MakeMethod(config, *out.models);
  if (!decoder.ok()) return ToAbsl(decoder.status());
  out.method = config.name;
  out.method_config = config;
  out.decoder = *decoder;

  // Output.
  switch (request.image_format()) {
    case v1::IMAGE_FORMAT_UNSPECIFIED:
    case v1::PNG:
      out.image_format = v1::PNG;
      break;
    case v1::JPEG:
    case v1::RAW_RGB:
      out.image_format = request.image_format();
      break;
    default:
      return Invalid("image_format", absl::StrCat(static_cast<int>(request.image_format()),
                                                  " is not a known format (PNG, JPEG, RAW_RGB)"));
  }
  out.stream_rows = !request.stream().has_rows() || request.stream().rows();
  if (request.stream().preview_every_rows() > static_cast<uint32_t>(target.grid_size)) {
    return Invalid("stream.preview_every_rows",
                   absl::StrCat("at most the grid height (", target.grid_size, ")"));
  }
  out.preview_every_rows = static_cast<int>(request.stream().preview_every_rows());
  if (request.stream().partial_images() > kMaxPartialImages) {
    return Invalid("stream.partial_images", absl::StrCat("must be in [0, ", kMaxPartialImages,
                                                         "], got ",
                                                         request.stream().partial_images()));
  }
  out.partial_images = static_cast<int>(request.stream().partial_images());
  out.full_size_previews = request.stream().full_size_previews();
  return out;
}

}  // namespace mulo::server
