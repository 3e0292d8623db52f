// Reflection streams against a hostile client (issue 38): malformed messages first, in the
// middle and last, on grpc.reflection.v1 (answered by mulo_server itself) and v1alpha (gRPC's
// own implementation); cancel between messages, a deadline mid-stream, a drain mid-stream and
// 100 streams at once. After each, the server is alive: health answers SERVING and a Generate
// completes. On 28b0cd3 the first malformed v1 message aborted the process (SIGABRT,
// "assertion failed: call_ == nullptr").
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "grpc/reflection/v1/reflection.pb.h"
#include "tests/server/grpc_calls.h"
#include "tests/server/raw_stream.h"
#include "tests/server/server_process.h"

namespace mulo::testing {
namespace {

using Wait = RawStream::Wait;
using grpc::reflection::v1::ServerReflectionRequest;
using grpc::reflection::v1::ServerReflectionResponse;

constexpr char kV1[] = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo";
constexpr char kV1Alpha[] = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo";
constexpr Wait kStep{10 * 1000};  // generous: every step is answered in milliseconds

std::string ListServices() {
  ServerReflectionRequest request;
  request.set_list_services("");
  return request.SerializeAsString();
}

std::string SymbolRequest(const std::string& symbol) {
  ServerReflectionRequest request;
  request.set_file_containing_symbol(symbol);
  return request.SerializeAsString();
}

// Bytes that do not parse as a ServerReflectionRequest: the truncated field, and random
// bytes of 3, 7, 64 and 300 (seeded; lengths whose draw happened to parse are redrawn).
std::vector<std::string> MalformedMessages() {
  std::vector<std::string> messages = {std::string("\x0a", 1)};
  std::mt19937 random(38);
  for (size_t length : {3, 7, 64, 300}) {
    std::string bytes;
    do {
      bytes.clear();
      for (size_t i = 0; i < length; ++i) bytes.push_back(static_cast<char>(random() & 0xff));
    } while (ServerReflectionRequest().ParseFromString(bytes));
    messages.push_back(bytes);
  }
  return messages;
}

std::string Hex(const std::string& bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < bytes.size() && i < 8; ++i) {
    out += kDigits[(bytes[i] >> 4) & 0xf];
    out += kDigits[bytes[i] & 0xf];
  }
  return out + (bytes.size() > 8 ? "... (" + std::to_string(bytes.size()) + " bytes)" : "");
}

// The answer to a request that parsed: a ServerReflectionResponse echoing it.
void ExpectAnswers(const std::optional<std::string>& reply, const std::string& request) {
  ASSERT_TRUE(reply.has_value()) << "no response";
  ServerReflectionResponse response;
  ASSERT_TRUE(response.ParseFromString(*reply));
  EXPECT_EQ(response.original_request().SerializeAsString(), request);
}

class ReflectionStreamsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = ServerProcess::Start(kRepository);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    channel_ = LoopbackChannel(server_->port());
  }

  // Health SERVING and one Generate to its end: the process survived and still serves.
  void ExpectServing() {
    grpc::StatusCode code = grpc::StatusCode::UNKNOWN;
    EXPECT_EQ(Health(*server_, "", &code), grpc::health::v1::HealthCheckResponse::SERVING)
        << "health: " << code << "\n"
        << server_->Log();
    auto stub = server_->NewStub();
    const StreamResult generated = RunStream(*stub, ValidRequest(38), 60);
    EXPECT_TRUE(generated.status.ok()) << generated.status.error_message();
    EXPECT_TRUE(generated.image.has_value());
  }

  std::unique_ptr<ServerProcess> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

// v1: INVALID_ARGUMENT naming the message type; the stream ends there.
void ExpectRefusedAsMalformed(const std::optional<grpc::Status>& status) {
  ASSERT_TRUE(status.has_value()) << "the stream did not end";
  EXPECT_EQ(status->error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status->error_message();
  EXPECT_EQ(status->error_message().rfind(
                "request: the bytes are not a valid grpc.reflection.v1.ServerReflectionRequest", 0),
            0u)
      << status->error_message();
}

TEST_F(ReflectionStreamsTest, MalformedFirstMessage) {
  for (const std::string& bad : MalformedMessages()) {
    SCOPED_TRACE(Hex(bad));
    RawStream v1(channel_, kV1);
    EXPECT_TRUE(v1.Write(bad, kStep));
    EXPECT_FALSE(v1.Read(kStep).has_value());
    ExpectRefusedAsMalformed(v1.Finish(kStep));
    // gRPC's own v1alpha ends the stream too (its status is its own affair); the server lives.
    RawStream alpha(channel_, kV1Alpha);
    alpha.Write(bad, kStep);
    alpha.WritesDone(kStep);
    EXPECT_TRUE(alpha.Finish(kStep).has_value()) << "v1alpha stream did not end";
  }
  ExpectServing();
}

TEST_F(ReflectionStreamsTest, MalformedAfterAValidRequestWhoseAnswerIsInFlight) {
  // The second sequence: the malformed message follows at once, before the first
  // answer is read.
  for (const std::string& bad : MalformedMessages()) {
    SCOPED_TRACE(Hex(bad));
    RawStream v1(channel_, kV1);
    EXPECT_TRUE(v1.Write(ListServices(), kStep));
    EXPECT_TRUE(v1.Write(bad, kStep));
    ExpectAnswers(v1.Read(kStep), ListServices());
    EXPECT_FALSE(v1.Read(kStep).has_value());
    ExpectRefusedAsMalformed(v1.Finish(kStep));
  }
  ExpectServing();
}

TEST_F(ReflectionStreamsTest, MalformedInTheMiddleAndLast) {
  const std::string bad = MalformedMessages()[2];
  const std::string symbol = SymbolRequest("mulo.v1.ImageGeneration");
  {
    SCOPED_TRACE("middle");
    RawStream v1(channel_, kV1);
    ASSERT_TRUE(v1.Write(symbol, kStep));
    ExpectAnswers(v1.Read(kStep), symbol);
    v1.Write(bad, kStep);
    // Anything written after the malformed message is not answered.
    v1.Write(ListServices(), kStep);
    EXPECT_FALSE(v1.Read(kStep).has_value());
    ExpectRefusedAsMalformed(v1.Finish(kStep));
  }
  {
    SCOPED_TRACE("last, then half-close");
    RawStream v1(channel_, kV1);
    ASSERT_TRUE(v1.Write(ListServices(), kStep));
    ASSERT_TRUE(v1.Write(symbol, kStep));
    v1.Write(bad, kStep);
    v1.WritesDone(kStep);
    ExpectAnswers(v1.Read(kStep), ListServices());
    ExpectAnswers(v1.Read(kStep), symbol);
    EXPECT_FALSE(v1.Read(kStep).has_value());
    ExpectRefusedAsMalformed(v1.Finish(kStep));
  }
  ExpectServing();
}

TEST_F(ReflectionStreamsTest, ValidStreamEndsOkAtHalfClose) {
  for (const char* method : {kV1, kV1Alpha}) {
    SCOPED_TRACE(method);
    RawStream stream(channel_, method);
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(stream.Write(ListServices(), kStep));
    ASSERT_TRUE(stream.WritesDone(kStep));
    for (int i = 0; i < 3; ++i) ExpectAnswers(stream.Read(kStep), ListServices());
    EXPECT_FALSE(stream.Read(kStep).has_value());
    const auto status = stream.Finish(kStep);
    ASSERT_TRUE(status.has_value());
    EXPECT_TRUE(status->ok()) << status->error_code() << " " << status->error_message();
  }
  ExpectServing();
}

TEST_F(ReflectionStreamsTest, CancelBetweenMessages) {
  for (const char* method : {kV1, kV1Alpha}) {
    SCOPED_TRACE(method);
    for (bool answer_read : {true, false}) {
      RawStream stream(channel_, method);
      ASSERT_TRUE(stream.Write(ListServices(), kStep));
      if (answer_read) ExpectAnswers(stream.Read(kStep), ListServices());
      stream.Cancel();
      const auto status = stream.Finish(kStep);
      ASSERT_TRUE(status.has_value());
      EXPECT_EQ(status->error_code(), grpc::StatusCode::CANCELLED);
    }
  }
  ExpectServing();
}

TEST_F(ReflectionStreamsTest, DeadlineMidStream) {
  for (const char* method : {kV1, kV1Alpha}) {
    SCOPED_TRACE(method);
    RawStream stream(channel_, method, Wait(500));
    ASSERT_TRUE(stream.Write(ListServices(), kStep));
    ExpectAnswers(stream.Read(kStep), ListServices());
    // Nothing more is sent; the deadline ends the stream.
    const auto status = stream.Finish(kStep);
    ASSERT_TRUE(status.has_value());
    EXPECT_EQ(status->error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  }
  ExpectServing();
}

TEST_F(ReflectionStreamsTest, HundredStreamsAtOnce) {
  constexpr int kStreams = 100;
  const std::vector<std::string> malformed = MalformedMessages();
  std::vector<std::unique_ptr<RawStream>> streams;
  for (int i = 0; i < kStreams; ++i) {
    streams.push_back(std::make_unique<RawStream>(channel_, i % 4 == 3 ? kV1Alpha : kV1));
  }
  // Every stream gets a valid request; then each in turn: another valid one, a malformed one,
  // a cancel or a half-close, so all four endings interleave on one connection.
  for (auto& stream : streams) ASSERT_TRUE(stream->Write(ListServices(), kStep));
  for (int i = 0; i < kStreams; ++i) {
    switch (i % 4) {
      case 0:
        streams[i]->Write(SymbolRequest("grpc.health.v1.Health"), kStep);
        streams[i]->WritesDone(kStep);
        break;
      case 1:
        streams[i]->Write(malformed[i % malformed.size()], kStep);
        break;
      case 2:
        streams[i]->Cancel();
        break;
      case 3:
        streams[i]->WritesDone(kStep);
        break;
    }
  }
  for (int i = 0; i < kStreams; ++i) {
    SCOPED_TRACE(i);
    const auto status = streams[i]->Finish(kStep);
    ASSERT_TRUE(status.has_value()) << "stream " << i << " did not end";
    const grpc::StatusCode expected[] = {grpc::StatusCode::OK, grpc::StatusCode::INVALID_ARGUMENT,
                                         grpc::StatusCode::CANCELLED, grpc::StatusCode::OK};
    EXPECT_EQ(status->error_code(), expected[i % 4]) << status->error_message();
  }
  streams.clear();
  ExpectServing();
}

// SIGTERM while reflection streams are open, one idle and one mid-exchange: the process drains
// and exits 0, and every stream ends (none holds the process).
TEST_F(ReflectionStreamsTest, DrainMidStream) {
  RawStream idle(channel_, kV1);
  RawStream busy(channel_, kV1);
  RawStream alpha(channel_, kV1Alpha);
  ASSERT_TRUE(busy.Write(ListServices(), kStep));
  ExpectAnswers(busy.Read(kStep), ListServices());
  ASSERT_TRUE(alpha.Write(ListServices(), kStep));
  ExpectAnswers(alpha.Read(kStep), ListServices());
  server_->Signal(SIGTERM);
  for (RawStream* stream : {&idle, &busy, &alpha}) {
    const auto status = stream->Finish(kStep);
    ASSERT_TRUE(status.has_value()) << "a stream outlived the drain";
    // Cut by the server's shutdown: which non-OK code the client reads is gRPC's choice.
    EXPECT_FALSE(status->ok());
  }
  EXPECT_EQ(server_->Wait(30), 0) << server_->Log();
}

}  // namespace
}  // namespace mulo::testing
