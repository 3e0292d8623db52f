#include "server/http/openai_images.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "absl/strings/str_cat.h"

namespace mulo::server::http {
namespace {

using Json = nlohmann::json;

// The param an invalid body is refused with ("" when accepted).
std::string RefusedParam(const std::string& body) {
  auto parsed = ParseImagesRequest(body);
  if (parsed.ok()) return "";
  EXPECT_TRUE(absl::IsInvalidArgument(parsed.status())) << parsed.status();
  return ParamOf(parsed.status());
}

TEST(OpenAiImagesTest, OpenAisFieldsAndOurExtensionsMapToTheRequest) {
  auto parsed = ParseImagesRequest(R"({
    "model": "synth", "prompt": "a red circle", "n": 3, "size": "64x64",
    "response_format": "b64_json", "output_format": "jpeg", "partial_images": 2, "user": "u1",
    "quality": "auto", "method": "mulo", "mulo": {"tau": 0.0001, "preset": "PAPER"},
    "seed": 18446744073709551615, "cfg_scale": 2.5, "temperature": 0.5, "top_k": 7,
    "top_p": 0.9, "timeout": 2.5, "commit_map": true})");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const v1::GenerateRequest& r = parsed->request;
  EXPECT_EQ(r.model(), "synth");
  EXPECT_EQ(r.prompt(), "a red circle");
  EXPECT_EQ(parsed->n, 3);
  EXPECT_EQ(parsed->width, 64);
  EXPECT_EQ(parsed->height, 64);
  EXPECT_EQ(r.image_format(), v1::JPEG);
  EXPECT_EQ(parsed->output_format, "jpeg");
  EXPECT_EQ(r.stream().partial_images(), 2u);
  EXPECT_EQ(parsed->user, "u1");
  ASSERT_TRUE(r.has_mulo());
  EXPECT_DOUBLE_EQ(r.mulo().tau(), 1e-4);
  EXPECT_EQ(r.mulo().preset(), v1::MuloParams::PAPER);
  EXPECT_EQ(r.sampling().seed(), 18446744073709551615ull);
  EXPECT_DOUBLE_EQ(r.sampling().cfg_scale(), 2.5);
  EXPECT_DOUBLE_EQ(r.sampling().temperature(), 0.5);
  EXPECT_EQ(r.sampling().top_k(), 7u);
  EXPECT_DOUBLE_EQ(r.sampling().top_p(), 0.9);
  EXPECT_DOUBLE_EQ(*parsed->timeout_seconds, 2.5);
  EXPECT_TRUE(r.return_commit_map());
  // The response carries no rows, and previews are OpenAI's full-size partial images.
  EXPECT_FALSE(r.stream().rows());
  EXPECT_TRUE(r.stream().full_size_previews());
}

TEST(OpenAiImagesTest, AMethodNameOrItsOptionsObjectPicksTheMethod) {
  auto named = ParseImagesRequest(R"({"model": "m", "method": "lantern++"})");
  ASSERT_TRUE(named.ok());
  EXPECT_TRUE(named->request.has_lantern_plus_plus());
  auto by_options = ParseImagesRequest(R"({"model": "m", "sjd": {"window": 8}})");
  ASSERT_TRUE(by_options.ok());
  EXPECT_EQ(by_options->request.sjd().window(), 8u);
  auto none = ParseImagesRequest(R"({"model": "m"})");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->request.method_case(), v1::GenerateRequest::METHOD_NOT_SET);
}

TEST(OpenAiImagesTest, BadBodiesAreRefusedNamingTheField) {
  EXPECT_EQ(RefusedParam(R"({"model": 3})"), "model");
  EXPECT_EQ(RefusedParam(R"({"n": 0})"), "n");
  EXPECT_EQ(RefusedParam(R"({"n": 2.5})"), "n");
  EXPECT_EQ(RefusedParam(R"({"n": "2"})"), "n");
  EXPECT_EQ(RefusedParam(R"({"seed": -1})"), "seed");
  EXPECT_EQ(RefusedParam(R"({"top_k": 4294967296})"), "top_k");
  EXPECT_EQ(RefusedParam(R"({"temperature": 1e400})"), "body");  // overflows: not JSON we read
  EXPECT_EQ(RefusedParam(R"({"response_format": "uri"})"), "response_format");
  EXPECT_EQ(RefusedParam(R"({"output_format": "gif"})"), "output_format");
  EXPECT_EQ(RefusedParam(R"({"quality": "ultra"})"), "quality");
  EXPECT_EQ(RefusedParam(R"({"background": "transparent"})"), "background");
  EXPECT_EQ(RefusedParam(R"({"style": "cartoon"})"), "style");
  EXPECT_EQ(RefusedParam(R"({"moderation": "none"})"), "moderation");
  EXPECT_EQ(RefusedParam(R"({"output_compression": 101})"), "output_compression");
  EXPECT_EQ(RefusedParam(R"({"n": 11})"), "n");
  EXPECT_EQ(RefusedParam(R"({"size": "0x64"})"), "size");
  EXPECT_EQ(RefusedParam(R"({"size": "4097x64"})"), "size");
  EXPECT_EQ(RefusedParam(R"({"size": "large"})"), "size");
  EXPECT_EQ(RefusedParam(R"({"prompt": null})"), "prompt");
  EXPECT_EQ(RefusedParam(R"({"stream": true, "response_format": "url"})"), "response_format");
  EXPECT_EQ(RefusedParam(R"({"method": "warp"})"), "method");
  EXPECT_EQ(RefusedParam(R"({"mulo": 1})"), "mulo");
  EXPECT_EQ(RefusedParam(R"({"mulo": {"tau": "x"}})"), "mulo");
  EXPECT_EQ(RefusedParam(R"({"method": "sjd", "mulo": {}})"), "mulo");
  EXPECT_EQ(RefusedParam(R"({"mulo": {}, "gsd": {}})"), "mulo");  // keys read in sorted order
  EXPECT_EQ(RefusedParam(R"({"stream": true, "n": 2})"), "n");
  EXPECT_EQ(RefusedParam(R"({"stream": "yes"})"), "stream");
  EXPECT_EQ(RefusedParam(R"({"timeout": 0})"), "timeout");
  EXPECT_EQ(RefusedParam(R"({"commit_map": "yes"})"), "commit_map");
  EXPECT_EQ(RefusedParam(R"({"condition_tokens": [1, -2]})"), "condition_tokens");
  EXPECT_EQ(RefusedParam(R"({"extra": 1})"), "extra");
  EXPECT_EQ(RefusedParam(R"({"an: odd key": 1})"), "an: odd key");  // exact, whatever it holds
  EXPECT_EQ(RefusedParam(R"({"user": ")" + std::string(300, 'u') + R"("})"), "user");
  // Not a JSON object, invalid UTF-8, NaN, too deep.
  EXPECT_EQ(RefusedParam("[1]"), "body");
  EXPECT_EQ(RefusedParam("{\"prompt\": \"\xff\"}"), "body");
  EXPECT_EQ(RefusedParam(R"({"temperature": NaN})"), "body");
  EXPECT_EQ(RefusedParam(std::string(17, '[') + std::string(17, ']')), "body");
  EXPECT_EQ(RefusedParam(std::string(16, '[') + std::string(16, ']')), "body");  // not an object
  EXPECT_EQ(RefusedParam(R"({"prompt": "[[[[[[[[[[[[[[[[[[[[[[["})"), "");  // brackets in text
}

TEST(OpenAiImagesTest, TheAcceptanceMapIsInTheStatsOnlyWhenTheImageCarriesOne) {
  FinishedImage image;
  image.request_id = "r1";
  image.image.kind = GenerationEvent::Kind::kImage;
  image.image.stats.tokens = 4;
  const Json without = Json::parse(ImagesResponseJson(1, ResponseEcho(), {image}));
  EXPECT_FALSE(without["mulo"]["images"][0].contains("commit_map"));
  image.image.stats.commit_map = {0, 1, 2, 0x83};
  const Json with = Json::parse(ImagesResponseJson(1, ResponseEcho(), {image}));
  // base64 of the bytes 00 01 02 83
  EXPECT_EQ(with["mulo"]["images"][0]["commit_map"], "AAECgw==");
}

TEST(OpenAiImagesTest, ValidationMessagesNameTheHttpField) {
  EXPECT_EQ(ParamOf("sampling.temperature: must be in [0, 100]"), "temperature");
  EXPECT_EQ(ParamOf("stream.partial_images: must be in [0, 3], got 5"), "partial_images");
  EXPECT_EQ(ParamOf("image_format: 7 is not a known format"), "output_format");
  EXPECT_EQ(ParamOf("mulo.tau: must be >= 0"), "mulo.tau");
  EXPECT_EQ(ParamOf("request deadline exceeded"), "");
}

TEST(OpenAiImagesTest, StatusesBecomeOpenAisHttpCodesAndErrorObjects) {
  EXPECT_EQ(HttpStatusOf(absl::InvalidArgumentError("x: y"), false), 400);
  EXPECT_EQ(HttpStatusOf(absl::NotFoundError("model: m"), false), 404);
  EXPECT_EQ(HttpStatusOf(absl::UnavailableError("queue is full"), true), 429);
  EXPECT_EQ(HttpStatusOf(absl::UnavailableError("draining"), false), 503);
  EXPECT_EQ(HttpStatusOf(absl::DeadlineExceededError("late"), false), 504);
  EXPECT_EQ(HttpStatusOf(absl::InternalError("bug"), false), 500);
  const Json error =
      Json::parse(ErrorJson(absl::InvalidArgumentError("sampling.top_p: must be in (0, 1]"), 400));
  EXPECT_EQ(error["error"]["message"], "sampling.top_p: must be in (0, 1]");
  EXPECT_EQ(error["error"]["type"], "invalid_request_error");
  EXPECT_EQ(error["error"]["param"], "top_p");
  EXPECT_EQ(Json::parse(ErrorJson(absl::DeadlineExceededError("late"), 504))["error"]["param"],
            nullptr);
  // Client bytes in a message never break the JSON.
  EXPECT_FALSE(Json::parse(ErrorJson(absl::InvalidArgumentError("model: \xff"), 400)).is_discarded());
}

TEST(OpenAiImagesTest, EveryFieldOfOpenAisImagesApiIsAcceptedAndMapped) {
  // openai-python sends parameters set to None as JSON null: unset. Every value of every
  // OpenAI field is accepted but a transparent background (refused above).
  auto nulls = ParseImagesRequest(R"({"model": null, "prompt": "p", "n": null, "size": null,
      "quality": null, "style": null, "response_format": null, "output_format": null,
      "output_compression": null, "background": null, "moderation": null, "user": null,
      "stream": null, "partial_images": null})");
  ASSERT_TRUE(nulls.ok()) << nulls.status();
  EXPECT_EQ(nulls->request.model(), "");  // the server's default family
  EXPECT_EQ(nulls->n, 1);
  for (const char* quality : {"auto", "low", "medium", "high", "standard", "hd"}) {
    auto parsed = ParseImagesRequest(absl::StrCat(R"({"prompt": "p", "quality": ")", quality,
                                                  R"("})"));
    ASSERT_TRUE(parsed.ok()) << quality;
    EXPECT_EQ(parsed->quality, quality);
  }
  auto all = ParseImagesRequest(R"({"prompt": "p", "n": 10, "size": "1792X1024",
      "style": "natural", "moderation": "low", "background": "opaque",
      "response_format": "url", "output_format": "webp", "output_compression": 80})");
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->n, 10);
  EXPECT_EQ(all->width, 1792);  // case-insensitive
  EXPECT_EQ(all->height, 1024);
  EXPECT_EQ(all->style, "natural");
  EXPECT_EQ(all->moderation, "low");
  EXPECT_EQ(all->response_format, "url");
  EXPECT_EQ(all->request.image_format(), v1::WEBP);
  EXPECT_EQ(all->request.image_quality(), 80u);
  // output_compression is a JPEG / WebP quality; PNG ignores it.
  auto png = ParseImagesRequest(R"({"prompt": "p", "output_compression": 50})");
  ASSERT_TRUE(png.ok());
  EXPECT_EQ(png->request.image_quality(), 0u);
  // Our extensions for conditions other than a prompt, and the text stage's method.
  auto condition = ParseImagesRequest(
      R"({"condition": [0.5, -1], "caption_length": 1, "text_stage_method": "sjd"})");
  ASSERT_TRUE(condition.ok()) << condition.status();
  EXPECT_EQ(condition->request.condition_size(), 2);
  EXPECT_EQ(condition->request.caption_length(), 1u);
  EXPECT_EQ(condition->request.text_stage_method(), "sjd");
}

TEST(OpenAiImagesTest, WithoutResponseFormatDallEModelsGetUrlsAsFromOpenAi) {
  const auto format = [](const std::string& body) {
    auto parsed = ParseImagesRequest(body);
    EXPECT_TRUE(parsed.ok()) << body << " " << parsed.status();
    return parsed.ok() ? parsed->response_format : "";
  };
  EXPECT_EQ(format(R"({"prompt": "p"})"), "b64_json");
  EXPECT_EQ(format(R"({"prompt": "p", "model": "tiny"})"), "b64_json");
  EXPECT_EQ(format(R"({"prompt": "p", "model": "gpt-image-1"})"), "b64_json");
  EXPECT_EQ(format(R"({"model": "dall-e-3", "quality": "standard", "prompt": "p"})"), "url");
  EXPECT_EQ(format(R"({"prompt": "p", "model": "dall-e-2", "response_format": null})"), "url");
  EXPECT_EQ(format(R"({"prompt": "p", "model": "dall-e-2", "response_format": "b64_json"})"),
            "b64_json");
  EXPECT_EQ(format(R"({"prompt": "p", "model": "dall-e-3", "stream": true})"), "b64_json");
}

TEST(OpenAiImagesTest, QualityPicksTheMethodWhenTheRequestNamesNone) {
  // low: the fastest method whatever its quality; high / hd: the fastest lossless one (auto);
  // standard, medium, auto: the server's default (no method set).
  auto low = ParseImagesRequest(R"({"prompt": "p", "quality": "low"})");
  ASSERT_TRUE(low.ok());
  ASSERT_TRUE(low->request.has_auto_());
  EXPECT_TRUE(low->request.auto_().relaxed());
  for (const char* quality : {"high", "hd"}) {
    auto high = ParseImagesRequest(absl::StrCat(R"({"prompt": "p", "quality": ")", quality,
                                                R"("})"));
    ASSERT_TRUE(high.ok());
    ASSERT_TRUE(high->request.has_auto_()) << quality;
    EXPECT_FALSE(high->request.auto_().relaxed());
  }
  for (const char* quality : {"standard", "medium", "auto"}) {
    auto plain = ParseImagesRequest(absl::StrCat(R"({"prompt": "p", "quality": ")", quality,
                                                 R"("})"));
    ASSERT_TRUE(plain.ok());
    EXPECT_EQ(plain->request.method_case(), v1::GenerateRequest::METHOD_NOT_SET) << quality;
  }
  // A named method wins; quality is only recorded then.
  auto named = ParseImagesRequest(R"({"prompt": "p", "quality": "low", "method": "sjd"})");
  ASSERT_TRUE(named.ok());
  EXPECT_TRUE(named->request.has_sjd());
  EXPECT_EQ(named->quality, "low");
}

TEST(OpenAiImagesTest, ASizeOtherThanTheFamilysResizes) {
  ModelSummary model;
  model.name = "synth";
  model.image_width = 64;
  model.image_height = 64;
  auto parsed = ParseImagesRequest(R"({"prompt": "p", "size": "auto"})");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(ApplySize(&*parsed, model), "64x64");
  EXPECT_EQ(parsed->request.output_width(), 0u);
  parsed = ParseImagesRequest(R"({"prompt": "p", "size": "64x64"})");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(ApplySize(&*parsed, model), "64x64");
  EXPECT_EQ(parsed->request.output_width(), 0u);
  parsed = ParseImagesRequest(R"({"prompt": "p", "size": "512x256"})");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(ApplySize(&*parsed, model), "512x256");
  EXPECT_EQ(parsed->request.output_width(), 512u);
  EXPECT_EQ(parsed->request.output_height(), 256u);
}

}  // namespace
}  // namespace mulo::server::http
