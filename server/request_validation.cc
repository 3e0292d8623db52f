#include "server/request_validation.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/decode/generate.h"
#include "engine/decode/method_registry.h"
#include "mulo/v1/method_names.h"
#include "server/client_text.h"
#include "server/engine_status.h"

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

// The fields set in a method's message (nested ones as "tree.top_k") onto `config` through the
// method's option specs: the proto names the options, the spec bounds them. Proto3 enums are
// open: a number the enum does not declare is refused, its UNSPECIFIED value (0) keeps the
// default. Options marked applies_first (MuLo-SD's preset) go before the rest.
absl::Status MapMethodFields(const google::protobuf::Message& params, const std::string& prefix,
                             const engine::MethodEntry& method, bool first,
                             engine::MethodConfig* config) {
  using google::protobuf::FieldDescriptor;
  const google::protobuf::Reflection& reflection = *params.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  reflection.ListFields(params, &fields);
  for (const FieldDescriptor* field : fields) {
    const std::string name = prefix + field->name();
    const std::string path = method.name + "." + name;
    if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (absl::Status st = MapMethodFields(reflection.GetMessage(params, field), name + ".",
                                            method, first, config);
          !st.ok()) {
        return st;
      }
      continue;
    }
    const engine::OptionSpec* option = engine::FindOption(method.options, name);
    if (option == nullptr) {
      // The proto and the method's spec disagree: method_specs_test keeps them in step.
      return absl::InternalError(absl::StrCat(path, ": no engine option for this field"));
    }
    if (option->applies_first != first) continue;
    double value = 0.0;
    switch (field->cpp_type()) {
      case FieldDescriptor::CPPTYPE_INT32:
        value = reflection.GetInt32(params, field);
        break;
      case FieldDescriptor::CPPTYPE_INT64:
        value = static_cast<double>(reflection.GetInt64(params, field));
        break;
      case FieldDescriptor::CPPTYPE_UINT32:
        value = reflection.GetUInt32(params, field);
        break;
      case FieldDescriptor::CPPTYPE_UINT64:
        value = static_cast<double>(reflection.GetUInt64(params, field));
        break;
      case FieldDescriptor::CPPTYPE_DOUBLE:
        value = reflection.GetDouble(params, field);
        break;
      case FieldDescriptor::CPPTYPE_FLOAT:
        value = reflection.GetFloat(params, field);
        break;
      case FieldDescriptor::CPPTYPE_BOOL:
        value = reflection.GetBool(params, field) ? 1 : 0;
        break;
      case FieldDescriptor::CPPTYPE_ENUM: {
        const int number = reflection.GetEnumValue(params, field);
        if (number == 0) continue;  // UNSPECIFIED: the default
        const auto* known = field->enum_type()->FindValueByNumber(number);
        const auto& choices = option->choices;
        const auto at = known == nullptr ? choices.end()
                                         : std::find(choices.begin(), choices.end(), known->name());
        if (at == choices.end()) {
          const std::string all = absl::StrJoin(choices.begin(), choices.end() - 1, ", ");
          return Invalid(path, absl::StrCat(number, " is not ", all,
                                            choices.size() > 1 ? " or " : "", choices.back()));
        }
        value = static_cast<double>(at - choices.begin());
        break;
      }
      default:
        return absl::InternalError(absl::StrCat(path, ": unsupported field type"));
    }
    if (engine::Status st = option->Check(method.name, value); !st.ok()) return ToAbsl(st);
    option->set(*config, value);
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<std::string> TextStageMethods(const engine::ModelSet& stage) {
  std::vector<std::string> out;
  for (const std::string& name : engine::AvailableMethods(stage)) {
    const engine::MethodEntry* entry = engine::FindMethod(name);
    if (entry == nullptr || !entry->make || !entry->lossless) continue;  // auto; relaxed ones
    auto config = engine::DefaultMethodConfig(name, stage);
    if (config.ok() && entry->lossless(*config)) out.push_back(name);
  }
  return out;
}

namespace {

// The model the request names, loaded: NOT_FOUND or UNAVAILABLE (it failed to load) naming it.
absl::Status FindModel(const v1::GenerateRequest& request, const ModelRepository& repository,
                       ValidatedRequest& out) {
  if (request.model().empty()) {
    return Invalid(
        "model", absl::StrCat("required (loaded: ", absl::StrJoin(repository.Names(), ", "), ")"));
  }
  out.models = repository.Find(request.model());
  if (out.models == nullptr && !repository.FailureOf(request.model()).empty()) {
    return absl::UnavailableError(absl::StrCat("model: ", Quoted(request.model()),
                                               " did not load: ",
                                               repository.FailureOf(request.model())));
  }
  if (out.models == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("model: ", Quoted(request.model()),
                     " is not loaded (loaded: ", absl::StrJoin(repository.Names(), ", "), ")"));
  }
  out.model_name = request.model();
  return absl::OkStatus();
}

// What to condition on: a prompt, precomputed features, TA-Tok ids or a class label.
absl::Status MapCondition(const v1::GenerateRequest& request, const ModelRepository& repository,
                          ValidatedRequest& out) {
  const engine::ConditionShape& target = out.models->target->condition_shape();
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
  if (target.mode == engine::ConditionMode::kClassLabel) {
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
    if (auto st = engine::CheckConditionTokens(*out.models, out.condition.ta_tok_ids); !st.ok()) {
      return ToAbsl(st);  // "condition_tokens: ..." from the engine
    }
  } else if (request.condition_size() > 0) {
    if (target.mode == engine::ConditionMode::kPromptIds) {
      return Invalid("condition", "this model reads the prompt's text; send prompt");
    }
    const int64_t want = target.rows * target.width;
    if (request.condition_size() != want) {
      return Invalid("condition", absl::StrCat(request.condition_size(), " floats, expected ",
                                               target.rows, " x ", target.width, " = ", want));
    }
    for (float x : request.condition()) {
      if (!std::isfinite(x)) return Invalid("condition", "contains NaN or infinity");
    }
    out.condition.features =
        torch::tensor(std::vector<float>(request.condition().begin(), request.condition().end()))
            .view({target.rows, target.width});
  } else {
    if (request.prompt().empty()) {
      return Invalid("prompt", "required (or send condition or condition_tokens)");
    }
    if (request.prompt().size() > kMaxPromptBytes) {
      return Invalid("prompt",
                     absl::StrCat(request.prompt().size(), " bytes, more than ", kMaxPromptBytes));
    }
    if (!IsValidUtf8(request.prompt())) return Invalid("prompt", "is not valid UTF-8");
    if (const PromptEncoder* encoder = repository.FindPromptEncoder(out.model_name);
        encoder != nullptr) {
      // Tar's MLLM ids or LlamaGen t2i's FLAN-T5 ids, for the family's first stage.
      if (auto st = encoder->Encode(request.prompt(), out.condition); !st.ok()) return st;
    } else {
      // The engine's own text stage (the bundled family's encoder), as GenerateImage requires.
      if (out.models->StageReading(engine::ConditionForm::kPrompt) == nullptr) {
        return Invalid("prompt", "this model has no text conditioner; send condition features");
      }
      auto tokens = out.models->conditioner->Tokenize(request.prompt());
      if (!tokens.ok()) return ToAbsl(tokens.status());  // "prompt: ..." from the engine
      out.prompt = request.prompt();
    }
  }

  return absl::OkStatus();
}

// Sampling: unset fields take the engine's defaults (the CFG scale: the family's); the engine
// validates the ranges, naming the field.
absl::Status MapSampling(const v1::GenerateRequest& request, ValidatedRequest& out) {
  const auto& s = request.sampling();
  out.sampling.cfg_scale = s.has_cfg_scale() ? s.cfg_scale() : out.models->default_cfg_scale;
  if (s.has_temperature()) out.sampling.temperature = s.temperature();
  out.sampling.top_k = s.top_k();
  if (s.has_top_p()) out.sampling.top_p = s.top_p();
  out.sampling.seed = s.seed();
  if (auto st = engine::ValidateSamplingParams(out.sampling, out.models->target->vocab_size());
      !st.ok()) {
    return ToAbsl(st);
  }
  return absl::OkStatus();
}

// Method: the proto's oneof mapped to the engine's options; the engine's registry checks the
// name, the family's components and the option ranges.
absl::Status MapMethod(const v1::GenerateRequest& request, ValidatedRequest& out) {
  auto defaults = engine::DefaultMethodConfig(v1::RequestMethodName(request), *out.models);
  if (!defaults.ok()) return ToAbsl(defaults.status());
  engine::MethodConfig config = *std::move(defaults);
  const auto* method_field =
      request.GetReflection()->GetOneofFieldDescriptor(request, &v1::MethodOneof());
  if (const engine::MethodEntry* method = engine::FindMethod(config.name);
      method_field != nullptr && method != nullptr) {
    const auto& params = request.GetReflection()->GetMessage(request, method_field);
    for (bool first : {true, false}) {
      if (absl::Status mapped = MapMethodFields(params, "", *method, first, &config);
          !mapped.ok()) {
        return mapped;
      }
    }
  }
  // `auto` becomes the method it chooses for this family and device (chosen_by says why).
  auto resolved = engine::ResolveMethod(config, *out.models);
  if (!resolved.ok()) return ToAbsl(resolved.status());
  config = *std::move(resolved);
  // The registry checks the name, the family's components and every option's bounds.
  auto decoder = engine::MakeMethod(config, *out.models);
  if (!decoder.ok()) return ToAbsl(decoder.status());
  out.method = config.name;
  out.method_config = config;
  out.decoder = *decoder;
  return absl::OkStatus();
}

// text_stage_method: how a family's decoding text stage (Tar's MLLM) runs.
absl::Status MapTextStage(const v1::GenerateRequest& request, ValidatedRequest& out) {
  if (request.text_stage_method().empty()) return absl::OkStatus();
  if (out.models->mllm_stage == nullptr || out.condition.prompt_ids.empty()) {
    return Invalid("text_stage_method",
                   "applies to a prompt on a family with a decoding text stage (Tar's MLLM)");
  }
  const engine::ModelSet& stage = *out.models->mllm_stage;
  const std::vector<std::string> methods = TextStageMethods(stage);
  const std::string& name = request.text_stage_method();
  if (std::find(methods.begin(), methods.end(), name) == methods.end()) {
    return Invalid("text_stage_method", absl::StrCat(Quoted(name), " is not one of ",
                                                     absl::StrJoin(methods, ", ")));
  }
  auto stage_config = engine::DefaultMethodConfig(name, stage);
  if (!stage_config.ok()) return ToAbsl(stage_config.status());
  auto stage_decoder = engine::MakeMethod(*stage_config, stage);
  if (!stage_decoder.ok()) return ToAbsl(stage_decoder.status());
  out.text_stage_decoder = *stage_decoder;
  return absl::OkStatus();
}

// The image's format, size and quality, and how it streams.
absl::Status MapOutput(const v1::GenerateRequest& request, ValidatedRequest& out) {
  switch (request.image_format()) {
    case v1::IMAGE_FORMAT_UNSPECIFIED:
    case v1::PNG:
      out.image_format = v1::PNG;
      break;
    case v1::JPEG:
    case v1::WEBP:
    case v1::RAW_RGB:
      out.image_format = request.image_format();
      break;
    default:
      return Invalid("image_format",
                     absl::StrCat(static_cast<int>(request.image_format()),
                                  " is not a known format (PNG, JPEG, WEBP, RAW_RGB)"));
  }
  if ((request.output_width() == 0) != (request.output_height() == 0)) {
    return Invalid(request.output_width() == 0 ? "output_width" : "output_height",
                   "give both output_width and output_height, or neither");
  }
  for (const auto& [field, value] : {std::pair<const char*, uint32_t>{"output_width",
                                                                      request.output_width()},
                                     {"output_height", request.output_height()}}) {
    if (value > kMaxOutputSide) {
      return Invalid(field, absl::StrCat("must be in [1, ", kMaxOutputSide, "] pixels, got ",
                                         value));
    }
  }
  if (static_cast<uint64_t>(request.output_width()) * request.output_height() > kMaxOutputPixels) {
    return Invalid("output_width", absl::StrCat("output_width x output_height must be at most ",
                                                kMaxOutputPixels, " pixels"));
  }
  if (request.image_quality() > 100) {
    return Invalid("image_quality", absl::StrCat("must be in [1, 100] (0: the default), got ",
                                                 request.image_quality()));
  }
  out.output_width = static_cast<int>(request.output_width());
  out.output_height = static_cast<int>(request.output_height());
  out.image_quality = static_cast<int>(request.image_quality());
  out.stream_rows = !request.stream().has_rows() || request.stream().rows();
  if (request.stream().preview_every_rows() >
      static_cast<uint32_t>(out.models->target->grid_size())) {
    return Invalid("stream.preview_every_rows",
                   absl::StrCat("at most the grid height (", out.models->target->grid_size(), ")"));
  }
  out.preview_every_rows = static_cast<int>(request.stream().preview_every_rows());
  if (request.stream().partial_images() > kMaxPartialImages) {
    return Invalid("stream.partial_images",
                   absl::StrCat("must be in [0, ", kMaxPartialImages, "], got ",
                                request.stream().partial_images()));
  }
  out.partial_images = static_cast<int>(request.stream().partial_images());
  out.full_size_previews = request.stream().full_size_previews();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ValidatedRequest> ValidateRequest(const v1::GenerateRequest& request,
                                                 const ModelRepository& repository) {
  ValidatedRequest out;
  out.request_id = request.request_id();
  if (out.request_id.size() > 128) return Invalid("request_id", "longer than 128 bytes");
  if (absl::Status st = FindModel(request, repository, out); !st.ok()) return st;
  if (absl::Status st = MapCondition(request, repository, out); !st.ok()) return st;
  if (absl::Status st = MapSampling(request, out); !st.ok()) return st;
  if (absl::Status st = MapMethod(request, out); !st.ok()) return st;
  if (absl::Status st = MapTextStage(request, out); !st.ok()) return st;
  if (absl::Status st = MapOutput(request, out); !st.ok()) return st;
  return out;
}

}  // namespace mulo::server
