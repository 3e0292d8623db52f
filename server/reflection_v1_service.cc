#include "server/reflection_v1_service.h"

#include <google/protobuf/descriptor.h>

#include <utility>

#include "grpc/reflection/v1/reflection.pb.h"
#include "server/reflection_answers.h"
#include "server/unparsable_request_interceptor.h"

namespace mulo::server {
namespace {

// Answers at once with `status` (a method other than v1's).
class Refusal : public grpc::ServerGenericBidiReactor {
 public:
  explicit Refusal(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

std::string BufferBytes(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  std::string bytes;
  if (!buffer.Dump(&slices).ok()) return bytes;
  for (const grpc::Slice& slice : slices) {
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return bytes;
}

}  // namespace

// One v1 stream. Exactly one of read, write and finish is outstanding at any moment: a read
// completes -> (answer, start the write) or finish; a write completes -> start the next read
// or finish. A failed operation means the call has ended (half-close on a read; cancel,
// deadline or shutdown on either), so the stream finishes and never starts another.
class ReflectionV1Service::Stream : public grpc::ServerGenericBidiReactor {
 public:
  explicit Stream(ReflectionV1Service* service) : service_(service) {
    service_->open_streams_.fetch_add(1);
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      // The client half-closed (every request was answered), or the call is over; in the
      // latter case gRPC sends nothing more and the status is moot.
      Finish(grpc::Status::OK);
      return;
    }
    grpc::reflection::v1::ServerReflectionRequest request;
    if (!request.ParseFromString(BufferBytes(request_))) {
      Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          UnparsableMessageText(request.GetDescriptor()->full_name())));
      return;
    }
    request_.Clear();
    const std::string answer =
        AnswerReflectionRequest(request, service_->services_,
                                *google::protobuf::DescriptorPool::generated_pool())
            .SerializeAsString();
    grpc::Slice slice(answer);
    response_ = grpc::ByteBuffer(&slice, 1);
    StartWrite(&response_);
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "the call ended before the answer"));
      return;
    }
    StartRead(&request_);
  }

  void OnDone() override {
    service_->open_streams_.fetch_sub(1);
    delete this;
  }

 private:
  ReflectionV1Service* const service_;
  grpc::ByteBuffer request_, response_;
};

ReflectionV1Service::ReflectionV1Service(std::vector<std::string> services)
    : services_(std::move(services)) {}

grpc::ServerGenericBidiReactor* ReflectionV1Service::CreateReactor(
    grpc::GenericCallbackServerContext* context) {
  if (context->method() != kReflectionV1Method) {
    return new Refusal(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, ""));
  }
  return new Stream(this);
}

}  // namespace mulo::server
