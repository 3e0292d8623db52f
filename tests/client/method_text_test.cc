// The client's --method text (client/method_text.h) sets the request's oneof and every option
// of every method through the proto's descriptor: numbers, booleans, enums by name in any
// case, nested fields with dots; anything else is refused naming the method or the option.
#include "client/method_text.h"

#include <gtest/gtest.h>

#include "mulo/v1/method_names.h"

namespace mulo::client {
namespace {

TEST(MethodTextTest, SetsTheMethodAndItsOptions) {
  v1::GenerateRequest request;
  ASSERT_TRUE(SetMethodFromText("lantern:k=4:delta=0.25:tree.static_tree=true:tree.top_k=3",
                                &request)
                  .ok());
  ASSERT_TRUE(request.has_lantern());
  EXPECT_EQ(request.lantern().k(), 4u);
  EXPECT_EQ(request.lantern().delta(), 0.25);
  EXPECT_TRUE(request.lantern().tree().static_tree());
  EXPECT_EQ(request.lantern().tree().top_k(), 3u);
  ASSERT_TRUE(SetMethodFromText("mulo:preset=paper:resample=Wavefront:draft_cfg_scale=2",
                                &request)
                  .ok());
  ASSERT_TRUE(request.has_mulo());
  EXPECT_FALSE(request.has_lantern());  // one method per request
  EXPECT_EQ(request.mulo().preset(), v1::MuloParams::PAPER);
  EXPECT_EQ(request.mulo().resample(), v1::MuloParams::WAVEFRONT);
  EXPECT_TRUE(request.mulo().has_draft_cfg_scale());
  ASSERT_TRUE(SetMethodFromText("lantern++", &request).ok());
  EXPECT_EQ(v1::RequestMethodName(request), "lantern++");
}

TEST(MethodTextTest, EveryMethodOfTheApiIsSelectableAndListed) {
  const std::string help = MethodOptionsHelp();
  for (const std::string& name : v1::ApiMethodNames()) {
    v1::GenerateRequest request;
    ASSERT_TRUE(SetMethodFromText(name, &request).ok()) << name;
    EXPECT_EQ(v1::RequestMethodName(request), name);
    EXPECT_NE(help.find("  " + name + ": "), std::string::npos) << help;
  }
  EXPECT_NE(help.find("  ar: no options\n"), std::string::npos) << help;
  EXPECT_NE(help.find("tree.top_k (integer)"), std::string::npos) << help;
  EXPECT_NE(help.find("pooling (additive | multiplicative | no_pooling)"), std::string::npos)
      << help;
}

TEST(MethodTextTest, RefusesWhatTheProtoDoesNotDeclareNamingIt) {
  auto error = [](const std::string& text) {
    v1::GenerateRequest request;
    absl::Status s = SetMethodFromText(text, &request);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << text;
    return std::string(s.message());
  };
  EXPECT_EQ(error("beam").rfind("--method: 'beam' is not a method of the API (ar, speculative", 0),
            0u);
  EXPECT_EQ(error("sjd:windows=4"), "--method: 'windows' is not an option of sjd (window, init)");
  EXPECT_EQ(error("sjd:window=four"), "--method: sjd.window=four: expected integer");
  EXPECT_EQ(error("sjd:window=-1"), "--method: sjd.window=-1: expected integer");  // unsigned
  EXPECT_EQ(error("sjd:init=sideways"),
            "--method: sjd.init=sideways: expected random | repeat_horizon");
  EXPECT_EQ(error("sjd:init=init_unspecified"),
            "--method: sjd.init=init_unspecified: expected random | repeat_horizon");
  EXPECT_EQ(error("eagle:static_tree=1"), "--method: eagle.static_tree=1: expected true | false");
  EXPECT_EQ(error("lantern:tree=1").rfind("--method: 'tree' is not an option of lantern", 0), 0u);
  EXPECT_EQ(error("sjd:window"), "--method: expected sjd:name=value:..., got 'window'");
}

}  // namespace
}  // namespace mulo::client
