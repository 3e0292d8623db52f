#include "server/reflection_v1.h"

#include <grpcpp/generic/generic_stub.h>

#include <optional>
#include <string>

namespace mulo::server {
namespace {

// Answers at once with `status` (unknown method, or no channel yet).
class Refusal : public grpc::ServerGenericBidiReactor {
 public:
  explicit Refusal(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

// One v1 stream relayed to v1alpha. Requests flow client -> v1alpha one at a time (the next
// read starts when the previous message was forwarded), responses flow back the same way, so
// each direction has one buffer and at most one operation outstanding. The server side
// finishes with the v1alpha call's status once that call is done, and owns everything.
class Relay : public grpc::ServerGenericBidiReactor {
 public:
  explicit Relay(std::shared_ptr<grpc::Channel> channel)
      : stub_(std::move(channel)), upstream_(this) {
    stub_.PrepareBidiStreamingCall(&client_context_, kReflectionV1AlphaMethod,
                                   grpc::StubOptions(), &upstream_);
    upstream_.StartRead(&response_);
    upstream_.StartCall();
    StartRead(&request_);
  }

  // Client -> relay: forward each request upstream; the client's half-close goes upstream too.
  void OnReadDone(bool ok) override {
    if (ok) {
      upstream_.StartWrite(&request_);
    } else {
      upstream_.StartWritesDone();
    }
  }
  // Relay -> client: a response was delivered; take the next one from upstream, or finish
  // if upstream ended meanwhile.
  void OnWriteDone(bool ok) override {
    std::optional<grpc::Status> finish;
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      finish.swap(upstream_status_);
    }
    if (finish) {
      Finish(*finish);
    } else if (ok) {
      upstream_.StartRead(&response_);
    } else {
      client_context_.TryCancel();
    }
  }
  void OnCancel() override { client_context_.TryCancel(); }
  void OnDone() override { delete this; }

 private:
  class Upstream : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
   public:
    explicit Upstream(Relay* relay) : relay_(relay) {}
    void OnWriteDone(bool ok) override {
      if (ok) relay_->StartRead(&relay_->request_);
    }
    void OnReadDone(bool ok) override {
      if (!ok) return;
      {
        absl::MutexLock lock(&relay_->mu_);
        relay_->writing_ = true;
      }
      relay_->StartWrite(&relay_->response_);
    }
    // The last response may still be on its way to the client: finish after it.
    void OnDone(const grpc::Status& status) override {
      {
        absl::MutexLock lock(&relay_->mu_);
        if (relay_->writing_) {
          relay_->upstream_status_ = status;
          return;
        }
      }
      relay_->Finish(status);
    }

   private:
    Relay* const relay_;
  };

  grpc::ClientContext client_context_;
  grpc::GenericStub stub_;
  Upstream upstream_;
  grpc::ByteBuffer request_, response_;
  absl::Mutex mu_;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;  // a response is being written to the client
  std::optional<grpc::Status> upstream_status_ ABSL_GUARDED_BY(mu_);  // Finish after that write
};

}  // namespace

void ReflectionV1Relay::SetChannel(std::shared_ptr<grpc::Channel> channel) {
  absl::MutexLock lock(&mu_);
  channel_ = std::move(channel);
}

grpc::ServerGenericBidiReactor* ReflectionV1Relay::CreateReactor(
    grpc::GenericCallbackServerContext* context) {
  if (context->method() != kReflectionV1Method) {
    return new Refusal(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, ""));
  }
  std::shared_ptr<grpc::Channel> channel;
  {
    absl::MutexLock lock(&mu_);
    channel = channel_;
  }
  if (channel == nullptr) {
    return new Refusal(grpc::Status(grpc::StatusCode::UNAVAILABLE, "server is starting"));
  }
  return new Relay(std::move(channel));
}

}  // namespace mulo::server
