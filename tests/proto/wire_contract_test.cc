// The generated wire contract links and round-trips (the genrule + system protoc path works).
#include <gtest/gtest.h>

#include "mulo/v1/image_generation.grpc.pb.h"
#include "mulo/v1/image_generation.pb.h"

namespace {

TEST(WireContractTest, GenerateRequestRoundTrips) {
  mulo::v1::GenerateRequest request;
  request.set_model("synth");
  request.set_prompt("a small red circle in the top left on a blue background");
  request.mutable_sampling()->set_temperature(0.0);
  request.mutable_sampling()->set_seed(42);
  request.mutable_mulo()->set_tau(1e-4);
  request.mutable_mulo()->set_rejection(mulo::v1::MuloParams::RASTER);
  request.mutable_mulo()->set_draft_prefix(mulo::v1::MuloParams::KEEP_DRAFTED);
  std::string bytes;
  ASSERT_TRUE(request.SerializeToString(&bytes));
  mulo::v1::GenerateRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(bytes));
  EXPECT_EQ(parsed.model(), "synth");
  EXPECT_EQ(parsed.method_case(), mulo::v1::GenerateRequest::kMulo);
  EXPECT_TRUE(parsed.sampling().has_temperature());  // explicit presence: 0 means greedy
  EXPECT_EQ(parsed.sampling().temperature(), 0.0);
  EXPECT_FALSE(parsed.sampling().has_top_p());
  EXPECT_EQ(parsed.mulo().rejection(), mulo::v1::MuloParams::RASTER);
  EXPECT_EQ(parsed.mulo().draft_prefix(), mulo::v1::MuloParams::KEEP_DRAFTED);
}

TEST(WireContractTest, ServiceDescriptorListsTheRpcs) {
  const auto* service = mulo::v1::GenerateRequest::descriptor()->file()->FindServiceByName(
      "ImageGeneration");
  ASSERT_NE(service, nullptr);
  EXPECT_EQ(service->full_name(), "mulo.v1.ImageGeneration");
  ASSERT_NE(service->FindMethodByName("Generate"), nullptr);
  EXPECT_TRUE(service->FindMethodByName("Generate")->server_streaming());
  EXPECT_NE(service->FindMethodByName("ListModels"), nullptr);
  EXPECT_NE(service->FindMethodByName("GetModel"), nullptr);
  // The generated gRPC stub names the same service.
  EXPECT_STREQ(mulo::v1::ImageGeneration::service_full_name(), "mulo.v1.ImageGeneration");
}

}  // namespace
