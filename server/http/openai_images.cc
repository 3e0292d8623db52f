#include "server/http/openai_images.h"

#include <google/protobuf/util/json_util.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "mulo/v1/method_names.h"
#include "server/client_text.h"
#include "server/request_validation.h"

namespace mulo::server::http {
namespace {

using Json = nlohmann::json;

// Text that may hold a client's bytes is dumped with invalid UTF-8 replaced, never thrown on.
std::string Dump(const Json& json) {
  return json.dump(-1, ' ', false, Json::error_handler_t::replace);
}


// The status's payload carries the field as the client spelled it, so that `param` is exact
// whatever bytes the name holds (the message bounds and quotes it).
constexpr char kParamPayload[] = "type.mulo.dev/param";
constexpr size_t kMaxParamBytes = 128;

absl::Status Invalid(absl::string_view param, absl::string_view problem) {
  absl::Status status = absl::InvalidArgumentError(absl::StrCat(param, ": ", problem));
  status.SetPayload(kParamPayload, absl::Cord(param.substr(0, kMaxParamBytes)));
  return status;
}

// A field name the client chose (an unknown key): quoted and bounded in the message.
absl::Status InvalidKey(absl::string_view key, absl::string_view problem) {
  absl::Status status = absl::InvalidArgumentError(absl::StrCat(Quoted(key), ": ", problem));
  status.SetPayload(kParamPayload, absl::Cord(key.substr(0, kMaxParamBytes)));
  return status;
}

const char* TypeName(const Json& value) {
  if (value.is_null()) return "null";
  if (value.is_boolean()) return "a boolean";
  if (value.is_number()) return "a number";
  if (value.is_string()) return "a string";
  if (value.is_array()) return "an array";
  return "an object";
}

absl::Status WrongType(absl::string_view param, absl::string_view want, const Json& value) {
  return Invalid(param, absl::StrCat("must be ", want, ", got ", TypeName(value)));
}

// Deepest nesting of objects and arrays, counted outside strings; stops counting past `limit`.
// Done before parsing so that no body can make the parser or the value's destructor recurse
// deeply.
int NestingDepth(absl::string_view text, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) return deepest;
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return deepest;
}

absl::StatusOr<std::string> String(const Json& value, absl::string_view param) {
  if (!value.is_string()) return WrongType(param, "a string", value);
  return value.get<std::string>();
}

absl::StatusOr<bool> Bool(const Json& value, absl::string_view param) {
  if (!value.is_boolean()) return WrongType(param, "true or false", value);
  return value.get<bool>();
}

absl::StatusOr<double> Number(const Json& value, absl::string_view param) {
  if (!value.is_number()) return WrongType(param, "a number", value);
  const double x = value.get<double>();
  if (!std::isfinite(x)) return Invalid(param, "must be a finite number");
  return x;
}

// An integer in [low, high]; JSON numbers with a fraction are refused.
absl::StatusOr<uint64_t> Integer(const Json& value, absl::string_view param, uint64_t low,
                                 uint64_t high) {
  const auto out_of_range = [&] {
    return Invalid(param, absl::StrCat("must be an integer in [", low, ", ", high, "]"));
  };
  if (value.is_number_unsigned()) {
    const uint64_t x = value.get<uint64_t>();
    if (x < low || x > high) return out_of_range();
    return x;
  }
  if (value.is_number_integer()) return out_of_range();  // negative
  if (value.is_number()) {
    return Invalid(param, absl::StrCat("must be an integer, got ", Dump(value)));
  }
  return WrongType(param, "an integer", value);
}

// OpenAI fields this server accepts only with the value that means "no change".
absl::Status OnlyValue(const Json& value, absl::string_view param,
                       std::initializer_list<const char*> accepted) {
  if (value.is_string()) {
    for (const char* a : accepted) {
      if (value.get<std::string>() == a) return absl::OkStatus();
    }
  }
  return Invalid(param, absl::StrCat("this server accepts only ", absl::StrJoin(accepted, " or "),
                                     ", got ", Dump(value)));
}

// A method's options object ("mulo": {"tau": 1e-4}) into its proto message, by the proto's
// own JSON mapping (so the proto is the one list of option names).
absl::Status ReadMethodOptions(const Json& value, const google::protobuf::FieldDescriptor& field,
                               v1::GenerateRequest* request) {
  const std::string& param = field.name();
  if (!value.is_object()) return WrongType(param, "an object of the method's options", value);
  google::protobuf::Message* options =
      request->GetReflection()->MutableMessage(request, &field);
  google::protobuf::util::JsonParseOptions parse_options;
  parse_options.ignore_unknown_fields = false;
  const auto status =
      google::protobuf::util::JsonStringToMessage(Dump(value), options, parse_options);
  if (!status.ok()) {
    return Invalid(param, absl::StrCat("the options of method ", v1::ApiMethodName(field),
                                       " do not read: ", std::string(status.message())));
  }
  return absl::OkStatus();
}

#define MULO_HTTP_ASSIGN_OR_RETURN(lhs, expr)     \
  auto lhs##_or = (expr);                    \
  if (!lhs##_or.ok()) return lhs##_or.status(); \
  auto lhs = *std::move(lhs##_or)

std::string Base64(const std::string& bytes) { return absl::Base64Escape(bytes); }

Json StatsJson(const FinishedImage& image) {
  const engine::Stats& s = image.image.stats;
  Json phases = Json::object();
  for (int i = 0; i < engine::kNumPhases; ++i) {
    if (s.phase_seconds[i] > 0) {
      phases[engine::PhaseName(static_cast<engine::Phase>(i))] = s.phase_seconds[i];
    }
  }
  Json stats{{"request_id", image.request_id},
             {"tokens", s.tokens},
             {"target_forward_passes", s.target_forward_passes},
             {"draft_forward_passes", s.draft_forward_passes},
             {"drafted_tokens", s.drafted_tokens},
             {"accepted_tokens", s.accepted_tokens},
             {"resampled_tokens", s.resampled_tokens},
             {"relaxed_accepted_tokens", s.relaxed_accepted_tokens},
             {"accepted_per_position", s.accepted_per_position},
             {"mean_accepted_length", s.MeanAcceptedLength()},
             {"acceptance_rate", s.AcceptanceRate()},
             {"step_compression", s.StepCompression()},
             {"iterations", s.verify_steps},
             {"queue_seconds", image.image.queue_seconds},
             {"first_row_seconds", image.image.first_row_seconds},
             {"decode_seconds", s.total_seconds},
             {"phase_seconds", phases},
             {"method", image.image.method},
             {"method_choice", image.image.method_choice},
             {"image_tokens", image.image.tokens}};
  // Asked for with "commit_map": true; its codes are the gRPC Stats.commit_map's, base64.
  if (!s.commit_map.empty()) {
    stats["commit_map"] = Base64(std::string(s.commit_map.begin(), s.commit_map.end()));
  }
  return stats;
}

Json UsageObject(int64_t input_tokens, int64_t output_tokens) {
  return Json{{"input_tokens", input_tokens},
              {"output_tokens", output_tokens},
              {"total_tokens", input_tokens + output_tokens},
              {"input_tokens_details", {{"text_tokens", input_tokens}, {"image_tokens", 0}}}};
}

std::string SseEvent(absl::string_view type, const Json& data) {
  return absl::StrCat("event: ", type, "\ndata: ", Dump(data), "\n\n");
}

Json ModelObject(const ModelSummary& m, int64_t created) {
  Json info = {{"size", absl::StrCat(m.image_width, "x", m.image_height)},
               {"grid_size", m.grid_size},
               {"vocab_size", m.vocab_size},
               {"methods", m.methods},
               {"conditions", m.conditions},
               {"condition_rows", m.condition_rows},
               {"defaults",
                {{"cfg_scale", m.default_cfg_scale},
                 {"temperature", m.default_temperature},
                 {"top_p", m.default_top_p}}}};
  if (m.num_classes > 0) info["num_classes"] = m.num_classes;
  if (!m.auto_method.empty()) info["auto_method"] = m.auto_method;
  if (!m.auto_choice.empty()) info["auto_choice"] = m.auto_choice;
  if (m.condition_width > 0) info["condition_width"] = m.condition_width;
  return {{"id", m.name}, {"object", "model"}, {"created", created}, {"owned_by", "mulo"},
          {"mulo", info}};
}

}  // namespace

namespace {

// What ParseImagesRequest reads beside the request itself, across its fields.
struct ParseState {
  ImagesRequest* out;
  std::string method_name;                                         // "method"
  const google::protobuf::FieldDescriptor* options_field = nullptr;  // a method's options
  std::optional<uint64_t> compression;                             // "output_compression"
  bool response_format_given = false;
};

// OpenAI's fields about the image it answers: size, format, compression and streaming.
// nullopt: `key` is not one of them.
std::optional<absl::Status> ReadOutputField(const std::string& key, const Json& value,
                                            ParseState& state) {
  ImagesRequest& out = *state.out;
  v1::GenerateRequest& r = out.request;
  if (key == "size") {
    MULO_HTTP_ASSIGN_OR_RETURN(size, String(value, key));
    const std::string lower = absl::AsciiStrToLower(size);
    if (lower != "auto") {
      const std::vector<std::string> parts = absl::StrSplit(lower, 'x');
      int width = 0, height = 0;
      if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &width) ||
          !absl::SimpleAtoi(parts[1], &height) || width < 1 || height < 1 ||
          width > static_cast<int>(kMaxOutputSide) || height > static_cast<int>(kMaxOutputSide) ||
          static_cast<uint64_t>(width) * height > kMaxOutputPixels) {
        return Invalid(key, absl::StrCat("must be \"auto\" or \"WIDTHxHEIGHT\" with each side in "
                                         "[1, ", kMaxOutputSide, "], got ",
                                         Quoted(size)));
      }
      out.width = width;
      out.height = height;
    }
  } else if (key == "response_format") {
    MULO_HTTP_ASSIGN_OR_RETURN(format, String(value, key));
    if (format != "b64_json" && format != "url") return Invalid(key, "must be b64_json or url");
    out.response_format = format;
    state.response_format_given = true;
  } else if (key == "output_format") {
    MULO_HTTP_ASSIGN_OR_RETURN(format, String(value, key));
    if (format == "png") {
      r.set_image_format(v1::PNG);
    } else if (format == "jpeg" || format == "jpg") {
      r.set_image_format(v1::JPEG);
    } else if (format == "webp") {
      r.set_image_format(v1::WEBP);
    } else {
      return Invalid(key, absl::StrCat("must be png, jpeg or webp, got \"",
                                       absl::CHexEscape(format), "\""));
    }
    out.output_format = format == "jpg" ? "jpeg" : format;
  } else if (key == "output_compression") {
    MULO_HTTP_ASSIGN_OR_RETURN(level, Integer(value, key, 0, 100));
    state.compression = level;
  } else if (key == "stream") {
    MULO_HTTP_ASSIGN_OR_RETURN(stream, Bool(value, key));
    out.stream = stream;
  } else if (key == "partial_images") {
    // The bound is the validation's (stream.partial_images), shared with gRPC.
    MULO_HTTP_ASSIGN_OR_RETURN(partial,
                               Integer(value, key, 0, std::numeric_limits<uint32_t>::max()));
    r.mutable_stream()->set_partial_images(static_cast<uint32_t>(partial));
  } else {
    return std::nullopt;
  }
  return absl::OkStatus();
}

// OpenAI's other fields (the Images API's). nullopt: `key` is not one of them.
std::optional<absl::Status> ReadOpenAiField(const std::string& key, const Json& value,
                                            ParseState& state) {
  ImagesRequest& out = *state.out;
  v1::GenerateRequest& r = out.request;
  if (key == "model") {
    MULO_HTTP_ASSIGN_OR_RETURN(model, String(value, key));
    r.set_model(model);
  } else if (key == "prompt") {
    MULO_HTTP_ASSIGN_OR_RETURN(prompt, String(value, key));
    r.set_prompt(prompt);
  } else if (key == "n") {
    MULO_HTTP_ASSIGN_OR_RETURN(n, Integer(value, key, 1, kMaxImagesPerRequest));
    out.n = static_cast<int>(n);
  } else if (key == "user") {
    MULO_HTTP_ASSIGN_OR_RETURN(user, String(value, key));
    if (user.size() > 256) return Invalid(key, "at most 256 bytes");
    out.user = user;
  } else if (key == "quality") {
    MULO_HTTP_ASSIGN_OR_RETURN(quality, String(value, key));
    if (absl::Status s = OnlyValue(value, key, {"auto", "low", "medium", "high", "standard", "hd"});
        !s.ok()) {
      return s;
    }
    out.quality = quality;
  } else if (key == "style") {
    if (absl::Status s = OnlyValue(value, key, {"vivid", "natural"}); !s.ok()) return s;
    out.style = value.get<std::string>();
  } else if (key == "moderation") {
    if (absl::Status s = OnlyValue(value, key, {"auto", "low"}); !s.ok()) return s;
    out.moderation = value.get<std::string>();
  } else if (key == "background") {
    MULO_HTTP_ASSIGN_OR_RETURN(background, String(value, key));
    if (background == "transparent") {
      return Invalid(key, "transparent is not available: the model families draw opaque "
                          "images (no alpha channel); use opaque or auto");
    }
    if (absl::Status s = OnlyValue(value, key, {"opaque", "auto"}); !s.ok()) return s;
    out.background = background;
  } else {
    return std::nullopt;
  }
  return absl::OkStatus();
}

// The decoding method: "method" and one method's options, by the name of its oneof field.
// nullopt: `key` is neither.
std::optional<absl::Status> ReadMethodField(const std::string& key, const Json& value,
                                            ParseState& state) {
  v1::GenerateRequest& r = state.out->request;
  if (key == "method") {
    MULO_HTTP_ASSIGN_OR_RETURN(name, String(value, key));
    if (v1::ApiMethodField(name) == nullptr) {
      return Invalid(key, absl::StrCat("unknown method \"", absl::CHexEscape(name),
                                       "\"; one of ", absl::StrJoin(v1::ApiMethodNames(), ", ")));
    }
    state.method_name = name;
  } else if (const auto* field = v1::MethodOneof().containing_type()->FindFieldByName(key);
             field != nullptr && field->containing_oneof() == &v1::MethodOneof()) {
    if (state.options_field != nullptr) {
      return Invalid(key, absl::StrCat("options for two methods (", state.options_field->name(),
                                       " and ", key, "); give one"));
    }
    if (absl::Status s = ReadMethodOptions(value, *field, &r); !s.ok()) return s;
    state.options_field = field;
  } else {
    return std::nullopt;
  }
  return absl::OkStatus();
}

// A sampling field (seed, cfg_scale, temperature, top_k, top_p: the fields of the proto's
// SamplingParams) at the body's top level, read by the proto's JSON mapping, so the proto is the
// one list of them. nullopt: `key` is not one.
std::optional<absl::Status> ReadSamplingField(const std::string& key, const Json& value,
                                              v1::GenerateRequest& request) {
  const google::protobuf::FieldDescriptor* field =
      v1::SamplingParams::descriptor()->FindFieldByName(key);
  if (field == nullptr) return std::nullopt;
  if (!value.is_number()) return WrongType(key, "a number", value);
  v1::SamplingParams one_field;
  const auto status =
      google::protobuf::util::JsonStringToMessage(Dump(Json{{key, value}}), &one_field);
  if (!status.ok()) {
    return Invalid(key, absl::StrCat("does not fit the field (", field->cpp_type_name(),
                                     "): ", std::string(status.message())));
  }
  request.mutable_sampling()->MergeFrom(one_field);
  return absl::OkStatus();
}

// mulo's extensions: conditions, the text stage, the acceptance map and the timeout. nullopt: `key`
// is not one of them.
std::optional<absl::Status> ReadMuloField(const std::string& key, const Json& value,
                                          ParseState& state) {
  ImagesRequest& out = *state.out;
  v1::GenerateRequest& r = out.request;
  if (key == "class_label") {
    MULO_HTTP_ASSIGN_OR_RETURN(label, Integer(value, key, 0, std::numeric_limits<uint32_t>::max()));
    r.set_class_label(static_cast<uint32_t>(label));
  } else if (key == "condition_tokens") {
    if (!value.is_array()) return WrongType(key, "an array of integers", value);
    for (const auto& token : value) {
      MULO_HTTP_ASSIGN_OR_RETURN(t, Integer(token, key, 0, std::numeric_limits<uint32_t>::max()));
      r.add_condition_tokens(static_cast<uint32_t>(t));
    }
  } else if (key == "condition") {
    if (!value.is_array()) return WrongType(key, "an array of numbers", value);
    for (const auto& x : value) {
      MULO_HTTP_ASSIGN_OR_RETURN(number, Number(x, key));
      r.add_condition(static_cast<float>(number));
    }
  } else if (key == "caption_length") {
    MULO_HTTP_ASSIGN_OR_RETURN(length,
                               Integer(value, key, 0, std::numeric_limits<uint32_t>::max()));
    r.set_caption_length(static_cast<uint32_t>(length));
  } else if (key == "text_stage_method") {
    MULO_HTTP_ASSIGN_OR_RETURN(stage, String(value, key));
    r.set_text_stage_method(stage);
  } else if (key == "commit_map") {
    MULO_HTTP_ASSIGN_OR_RETURN(wanted, Bool(value, key));
    r.set_return_commit_map(wanted);
  } else if (key == "timeout") {
    MULO_HTTP_ASSIGN_OR_RETURN(seconds, Number(value, key));
    if (seconds <= 0 || seconds > 86400) return Invalid(key, "must be in (0, 86400] seconds");
    out.timeout_seconds = seconds;
  } else {
    return std::nullopt;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ImagesRequest> ParseImagesRequest(absl::string_view body) {
  if (NestingDepth(body, kMaxJsonDepth) > kMaxJsonDepth) {
    return Invalid("body", absl::StrCat("JSON nested deeper than ", kMaxJsonDepth, " levels"));
  }
  const Json json = Json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) {
    return Invalid("body", "not valid JSON (UTF-8 text holding one object)");
  }
  if (!json.is_object()) return Invalid("body", "must be a JSON object");

  ImagesRequest out;
  v1::GenerateRequest& r = out.request;
  // Only what the response carries: no rows events, previews as OpenAI's full-size partials.
  r.mutable_stream()->set_rows(false);
  r.mutable_stream()->set_full_size_previews(true);
  ParseState state{&out};
  for (const auto& [key, value] : json.items()) {
    // JSON null means "not given" (the openai SDKs send it for parameters set to None).
    if (value.is_null() && key != "prompt") continue;
    std::optional<absl::Status> read = ReadOpenAiField(key, value, state);
    if (!read) read = ReadOutputField(key, value, state);
    if (!read) read = ReadMethodField(key, value, state);
    if (!read) read = ReadSamplingField(key, value, state.out->request);
    if (!read) read = ReadMuloField(key, value, state);
    if (!read) return InvalidKey(key, "unknown field");
    if (!read->ok()) return *read;
  }
  if (json.contains("prompt") && json["prompt"].is_null()) {
    return WrongType("prompt", "a string", json["prompt"]);
  }
  if (!state.method_name.empty()) {
    const auto* field = v1::ApiMethodField(state.method_name);
    if (state.options_field != nullptr && state.options_field != field) {
      return Invalid(state.options_field->name(),
                     absl::StrCat("options for ", v1::ApiMethodName(*state.options_field),
                                  " but method is ", state.method_name));
    }
    if (state.options_field == nullptr) r.GetReflection()->MutableMessage(&r, field);
  } else if (state.options_field == nullptr) {
    // No method named: OpenAI's quality picks one (docs/http.md). low: the fastest method of
    // the family's calibration whatever its quality; high / hd: the fastest lossless one (its
    // images are distributed as ar's); medium, standard, auto: the server's default method.
    if (out.quality == "low") {
      r.mutable_auto_()->set_relaxed(true);
    } else if (out.quality == "high" || out.quality == "hd") {
      r.mutable_auto_();
    }
  }
  // output_compression is the JPEG / WebP quality (OpenAI's default 100: the best); PNG is
  // lossless and ignores it.
  if (state.compression && out.output_format != "png") {
    r.set_image_quality(static_cast<uint32_t>(std::max<uint64_t>(1, *state.compression)));
  }
  // No response_format: OpenAI answers dall-e-2 and dall-e-3 with URLs and every other model
  // with base64, and clients written for it read what it gives (LibreChat's DALL-E 3 tool reads
  // data[0].url without asking for one). A streamed answer is base64 events whatever the model.
  if (!state.response_format_given && !out.stream && absl::StartsWith(r.model(), "dall-e-")) {
    out.response_format = "url";
  }
  if (out.stream && out.n != 1) return Invalid("n", "a streamed request makes one image (n = 1)");
  if (out.stream && out.response_format == "url") {
    return Invalid("response_format", "a streamed request sends b64_json events; url is for "
                                      "whole responses");
  }
  return out;
}

std::string ApplySize(ImagesRequest* images, const ModelSummary& model) {
  if (images->width == 0 || (images->width == model.image_width &&
                             images->height == model.image_height)) {
    return absl::StrCat(model.image_width, "x", model.image_height);
  }
  images->request.set_output_width(static_cast<uint32_t>(images->width));
  images->request.set_output_height(static_cast<uint32_t>(images->height));
  return absl::StrCat(images->width, "x", images->height);
}

std::string ParamOf(const absl::Status& status) {
  if (auto param = status.GetPayload(kParamPayload)) return std::string(*param);
  return ParamOf(status.message());
}

std::string ParamOf(absl::string_view message) {
  const size_t colon = message.find(": ");
  if (colon == absl::string_view::npos) return "";
  absl::string_view path = message.substr(0, colon);
  if (path.empty() || path.find(' ') != absl::string_view::npos) return "";
  if (absl::ConsumePrefix(&path, "sampling.")) return std::string(path);
  if (absl::ConsumePrefix(&path, "stream.")) return std::string(path);
  if (path == "image_format") return "output_format";
  if (path == "name") return "model";
  return std::string(path);
}

int HttpStatusOf(const absl::Status& status, bool queue_full) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kResourceExhausted:
      return 400;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kCancelled:
      return 499;  // nginx's "client closed request": nobody reads it
    case absl::StatusCode::kUnimplemented:
      return 501;
    case absl::StatusCode::kUnavailable:
      return queue_full ? 429 : 503;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    default:
      return 500;
  }
}

std::string ErrorJson(const absl::Status& status, int http_status) {
  std::string type = "invalid_request_error";
  std::string code;
  switch (http_status) {
    case 401:
      code = "invalid_api_key";
      break;
    case 404:
      code = ParamOf(status) == "model" ? "model_not_found" : "not_found";
      break;
    case 413:
      code = "request_too_large";
      break;
    case 429:
      type = "rate_limit_error";
      code = "queue_full";
      break;
    case 503:
      type = "server_error";
      code = "unavailable";
      break;
    case 504:
      type = "server_error";
      code = "timeout";
      break;
    default:
      if (http_status >= 500) type = "server_error";
      code = absl::AsciiStrToLower(absl::StatusCodeToString(status.code()));
  }
  const std::string param = ParamOf(status);
  Json error = {{"message", std::string(status.message())},
                {"type", type},
                {"param", param.empty() ? Json(nullptr) : Json(param)},
                {"code", code}};
  return Dump(Json{{"error", error}});
}

std::string UsageJson(int64_t input_tokens, int64_t output_tokens) {
  return Dump(UsageObject(input_tokens, output_tokens));
}

std::string ImagesResponseJson(int64_t created, const ResponseEcho& echo,
                               const std::vector<FinishedImage>& images,
                               const std::vector<std::string>& urls) {
  Json data = Json::array();
  Json stats = Json::array();
  int64_t output_tokens = 0;
  for (size_t i = 0; i < images.size(); ++i) {
    const FinishedImage& image = images[i];
    data.push_back(i < urls.size() ? Json{{"url", urls[i]}}
                                   : Json{{"b64_json", Base64(image.image.image)}});
    stats.push_back(StatsJson(image));
    output_tokens += static_cast<int64_t>(image.image.tokens.size());
  }
  const Json response = {
      {"created", created},
      {"data", data},
      {"background", echo.background},
      {"output_format", echo.output_format},
      {"quality", echo.quality},
      {"size", echo.size},
      {"usage",
       UsageObject(echo.input_tokens * static_cast<int64_t>(images.size()), output_tokens)},
      {"mulo", {{"method", echo.method}, {"images", stats}}}};
  return Dump(response);
}

std::string PartialImageEvent(const std::string& image, int index, int64_t created_at,
                              const ResponseEcho& echo) {
  return SseEvent("image_generation.partial_image",
                  {{"type", "image_generation.partial_image"},
                   {"b64_json", Base64(image)},
                   {"created_at", created_at},
                   {"size", echo.size},
                   {"quality", echo.quality},
                   {"background", echo.background},
                   {"output_format", echo.output_format},
                   {"partial_image_index", index}});
}

std::string CompletedEvent(const FinishedImage& image, int64_t created_at,
                           const ResponseEcho& echo) {
  return SseEvent(
      "image_generation.completed",
      {{"type", "image_generation.completed"},
       {"b64_json", Base64(image.image.image)},
       {"created_at", created_at},
       {"size", echo.size},
       {"quality", echo.quality},
       {"background", echo.background},
       {"output_format", echo.output_format},
       {"usage", UsageObject(echo.input_tokens, static_cast<int64_t>(image.image.tokens.size()))},
       {"mulo", {{"method", echo.method}, {"images", Json::array({StatsJson(image)})}}}});
}

std::string ErrorEvent(const absl::Status& status, int http_status) {
  return absl::StrCat("event: error\ndata: ", ErrorJson(status, http_status), "\n\n");
}

std::string ModelJson(const ModelSummary& model, int64_t created) {
  return Dump(ModelObject(model, created));
}

std::string ModelListJson(const std::vector<ModelSummary>& models, int64_t created) {
  Json data = Json::array();
  for (const auto& m : models) data.push_back(ModelObject(m, created));
  return Dump(Json{{"object", "list"}, {"data", data}});
}

}  // namespace mulo::server::http
