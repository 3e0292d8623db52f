// One gRPC call of any method and shape, driven message by message with raw bytes, as a
// hostile client would: write bytes that need not parse, half-close, cancel, read, finish, each
// step waiting at most a given time. Built on the generic stub's completion-queue API, so an
// operation that has not completed in time stays outstanding and a later step waits for it
// (the client API allows one read and one write in flight; this class never breaks that rule,
// so whatever goes wrong is the server's doing). Used by the stream tests and the whole-surface
// fuzzer.
#ifndef MULO_TESTS_SERVER_RAW_STREAM_H_
#define MULO_TESTS_SERVER_RAW_STREAM_H_

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

namespace mulo::testing {

class RawStream {
 public:
  using Wait = std::chrono::milliseconds;

  // Starts `method` ("/package.Service/Method") on `channel`; `deadline` 0 means none.
  RawStream(const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
            Wait deadline = Wait(0));
  // Cancels the call if it is still open and waits for every operation to complete.
  ~RawStream();
  RawStream(const RawStream&) = delete;
  RawStream& operator=(const RawStream&) = delete;

  // Sends `bytes` as one message. False when the write failed (the call ended), the call is
  // half-closed or finished, or the write (or an earlier one) is still in flight after `wait`.
  bool Write(const std::string& bytes, Wait wait);
  // Half-closes. False as for Write.
  bool WritesDone(Wait wait);
  // The next message, or nullopt when the stream ended (or nothing came within `wait`; then
  // the read stays in flight and the next Read returns its message).
  std::optional<std::string> Read(Wait wait);
  // Cancels from the client side (the server sees OnCancel / IsCancelled).
  void Cancel() { context_.TryCancel(); }
  // The call's status once it ended; nullopt if it has not ended within `wait` (the server
  // neither finished it nor answered the read that would show its end). Reads and drops any
  // messages still coming.
  std::optional<grpc::Status> Finish(Wait wait);

  bool finished() const { return status_.has_value(); }

 private:
  enum Op { kStart, kWrite, kRead, kFinish, kOps };

  // Waits until `op` is no longer in flight or `until` passes; true when it is not in flight.
  bool AwaitOp(Op op, std::chrono::system_clock::time_point until);
  bool StartedOk(std::chrono::system_clock::time_point until);
  // No write in flight, none failed, not half-closed.
  bool CanStartWrite(std::chrono::system_clock::time_point until);
  // Takes one completion from the queue (until `until`); false on timeout.
  bool TakeOne(std::chrono::system_clock::time_point until);

  grpc::GenericStub stub_;
  grpc::ClientContext context_;
  grpc::CompletionQueue queue_;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call_;
  bool in_flight_[kOps] = {};
  bool started_ok_ = false;
  bool writes_done_ = false;   // no more writes may be started
  bool write_failed_ = false;  // a write failed: the call ended
  bool read_ended_ = false;    // a read failed: the server sent its status
  bool finish_started_ = false;
  grpc::ByteBuffer write_buffer_, read_buffer_;
  grpc::Status finish_status_;
  std::optional<grpc::Status> status_;
};

// A channel to 127.0.0.1:`port`, insecure, with its own connection (not shared with other
// channels of the process, so one test's cancellations do not touch another's calls).
std::shared_ptr<grpc::Channel> LoopbackChannel(int port);

}  // namespace mulo::testing

#endif  // MULO_TESTS_SERVER_RAW_STREAM_H_
