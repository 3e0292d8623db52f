#include "server/request_validation.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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

// The fields set in a method's message as the engine's method options, nested ones named
// "tree.top_k": the proto names the options, the engine's specs bound them. Proto3 enums are
// open: their UNSPECIFIED value (0) keeps the default, any other number goes by its name (or
// its number, which the engine refuses naming the choices).
absl::Status ReadMethodOptions(const google::protobuf::Message& params, const std::string& prefix,
                               std::vector<engine::MethodOption>& out) {
  using google::protobuf::FieldDescriptor;
  const google::protobuf::Reflection& reflection = *params.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  reflection.ListFields(params, &fields);
  for (const FieldDescriptor* field : fields) {
    engine::MethodOption option;
    option.name = prefix + field->name();
    switch (field->cpp_type()) {
      case FieldDescriptor::CPPTYPE_MESSAGE:
        if (absl::Status st =
                ReadMethodOptions(reflection.GetMessage(params, field), option.name + ".", out);
            !st.ok()) {
          return st;
        }
        continue;
      case FieldDescriptor::CPPTYPE_INT32:
        option.value = reflection.GetInt32(params, field);
        break;
      case FieldDescriptor::CPPTYPE_INT64:
        option.value = static_cast<double>(reflection.GetInt64(params, field));
        break;
      case FieldDescriptor::CPPTYPE_UINT32:
        option.value = reflection.GetUInt32(params, field);
        break;
      case FieldDescriptor::CPPTYPE_UINT64:
        option.value = static_cast<double>(reflection.GetUInt64(params, field));
        break;
      case FieldDescriptor::CPPTYPE_DOUBLE:
        option.value = reflection.GetDouble(params, field);
        break;
      case FieldDescriptor::CPPTYPE_FLOAT:
        option.value = reflection.GetFloat(params, field);
        break;
      case FieldDescriptor::CPPTYPE_BOOL:
        option.value = reflection.GetBool(params, field) ? 1 : 0;
        break;
      case FieldDescriptor::CPPTYPE_ENUM: {
        const int number = reflection.GetEnumValue(params, field);
        if (number == 0) continue;  // UNSPECIFIED: the default
        const auto* known = field->enum_type()->FindValueByNumber(number);
        option.choice = known != nullptr ? known->name() : absl::StrCat(number);
        break;
      }
      default:
        return absl::InternalError(absl::StrCat(option.name, ": unsupported field type"));
    }
    out.push_back(std::move(option));
  }
  return absl::OkStatus();
}

// The model the request names, loaded: NOT_FOUND or UNAVAILABLE (it failed to load) naming it.
absl::Status FindModel(const v1::GenerateRequest& request, const ModelRepository& repository,
                       ValidatedRequest& out) {
  if (request.model().empty()) {
    return Invalid(
        "model", absl::StrCat("required (loaded: ", absl::StrJoin(repository.Names(), ", "), ")"));
  }
  out.engine = repository.Find(request.model());
  if (out.engine == nullptr && !repository.FailureOf(request.model()).empty()) {
    return absl::UnavailableError(absl::StrCat("model: ", Quoted(request.model()),
                                               " did not load: ",
                                               repository.FailureOf(request.model())));
  }
  if (out.engine == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("model: ", Quoted(request.model()),
                     " is not loaded (loaded: ", absl::StrJoin(repository.Names(), ", "), ")"));
  }
  out.model_name = request.model();
  return absl::OkStatus();
}

// What to condition on: a class label, TA-Tok ids, precomputed features or a prompt (which the
// family's prompt encoder, when it has one, turns into the ids its first stage reads). The
// engine checks them against the family.
absl::Status ReadCondition(const v1::GenerateRequest& request, const ModelRepository& repository,
                           const std::string& model, engine::ImageRequest& out) {
  if (request.condition_size() > 0 && request.condition_tokens_size() > 0) {
    return Invalid("condition_tokens", "send either condition features or condition_tokens");
  }
  out.condition.caption_length = request.caption_length();
  // All of them as sent: the engine refuses a mix its family does not take, naming the field.
  if (request.has_class_label()) out.condition.class_label = request.class_label();
  out.condition.ta_tok_ids.assign(request.condition_tokens().begin(),
                                  request.condition_tokens().end());
  out.features.assign(request.condition().begin(), request.condition().end());
  const bool conditioned = request.has_class_label() || request.condition_tokens_size() > 0 ||
                           request.condition_size() > 0;
  if (!conditioned && !request.prompt().empty()) {
    if (request.prompt().size() > kMaxPromptBytes) {
      return Invalid("prompt",
                     absl::StrCat(request.prompt().size(), " bytes, more than ", kMaxPromptBytes));
    }
    if (!IsValidUtf8(request.prompt())) return Invalid("prompt", "is not valid UTF-8");
    if (const text::PromptEncoder* encoder = repository.FindPromptEncoder(model);
        encoder != nullptr) {
      // The ids the family's first stage or its target reads (text/prompt_encoder.h).
      return encoder->Encode(request.prompt(), out.condition);
    }
    out.prompt = request.prompt();  // the engine's own text stage reads the text
  }
  return absl::OkStatus();
}

// Sampling: unset fields take the engine's defaults (the CFG scale: the family's).
void ReadSampling(const v1::GenerateRequest& request, engine::ImageRequest& out) {
  const auto& s = request.sampling();
  out.family_cfg_scale = !s.has_cfg_scale();
  if (s.has_cfg_scale()) out.sampling.cfg_scale = s.cfg_scale();
  if (s.has_temperature()) out.sampling.temperature = s.temperature();
  out.sampling.top_k = s.top_k();
  if (s.has_top_p()) out.sampling.top_p = s.top_p();
  out.sampling.seed = s.seed();
}

// The method: its name, and the fields of the proto's oneof as the engine's options.
absl::Status ReadMethod(const v1::GenerateRequest& request, engine::ImageRequest& out) {
  out.method = v1::RequestMethodName(request);
  const auto* method_field =
      request.GetReflection()->GetOneofFieldDescriptor(request, &v1::MethodOneof());
  if (method_field == nullptr) return absl::OkStatus();
  return ReadMethodOptions(request.GetReflection()->GetMessage(request, method_field), "",
                           out.method_options);
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
  if (request.stream().preview_every_rows() > static_cast<uint32_t>(out.engine->grid_size())) {
    return Invalid("stream.preview_every_rows",
                   absl::StrCat("at most the grid height (", out.engine->grid_size(), ")"));
  }
  out.preview_every_rows = static_cast<int>(request.stream().preview_every_rows());
  if (request.stream().partial_images() > kMaxPartialImages) {
    return Invalid("stream.partial_images",
                   absl::StrCat("must be in [0, ", kMaxPartialImages, "], got ",
                                request.stream().partial_images()));
  }
  out.partial_images = static_cast<int>(request.stream().partial_images());
  out.full_size_previews = request.stream().full_size_previews();
  out.return_commit_map = request.return_commit_map();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ValidatedRequest> ValidateRequest(const v1::GenerateRequest& request,
                                                 const ModelRepository& repository) {
  ValidatedRequest out;
  out.request_id = request.request_id();
  if (out.request_id.size() > 128) return Invalid("request_id", "longer than 128 bytes");
  if (absl::Status st = FindModel(request, repository, out); !st.ok()) return st;
  engine::ImageRequest asked;
  if (absl::Status st = ReadCondition(request, repository, out.model_name, asked); !st.ok()) {
    return st;
  }
  ReadSampling(request, asked);
  if (absl::Status st = ReadMethod(request, asked); !st.ok()) return st;
  asked.text_stage_method = request.text_stage_method();
  auto plan = out.engine->Plan(std::move(asked));
  if (!plan.ok()) return ToAbsl(plan.status());  // names the field
  out.plan = *std::move(plan);
  if (absl::Status st = MapOutput(request, out); !st.ok()) return st;
  return out;
}

}  // namespace mulo::server
