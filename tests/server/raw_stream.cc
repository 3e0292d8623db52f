#include "tests/server/raw_stream.h"

#include <utility>
#include <vector>

namespace mulo::testing {
namespace {

using SystemClock = std::chrono::system_clock;

}  // namespace

RawStream::RawStream(const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
                     Wait deadline)
    : stub_(channel) {
  if (deadline.count() > 0) context_.set_deadline(SystemClock::now() + deadline);
  call_ = stub_.PrepareCall(&context_, method, &queue_);
  in_flight_[kStart] = true;
  call_->StartCall(reinterpret_cast<void*>(kStart));
}

RawStream::~RawStream() {
  if (!finished()) {
    context_.TryCancel();
    // After a cancel every operation completes promptly, on the client side alone.
    Finish(Wait(60 * 1000));
  }
  // Whatever is still queued (nothing, unless Finish timed out above) is drained here.
  queue_.Shutdown();
  void* tag;
  bool ok;
  while (queue_.Next(&tag, &ok)) {
  }
}

bool RawStream::TakeOne(SystemClock::time_point until) {
  void* tag;
  bool ok;
  switch (queue_.AsyncNext(&tag, &ok, until)) {
    case grpc::CompletionQueue::GOT_EVENT: {
      const auto op = static_cast<Op>(reinterpret_cast<intptr_t>(tag));
      in_flight_[op] = false;
      if (op == kStart) started_ok_ = ok;
      if (op == kRead && !ok) read_ended_ = true;
      if (op == kWrite && !ok) write_failed_ = true;
      if (op == kFinish) status_ = finish_status_;
      return true;
    }
    case grpc::CompletionQueue::TIMEOUT:
    case grpc::CompletionQueue::SHUTDOWN:
      return false;
  }
  return false;
}

bool RawStream::AwaitOp(Op op, SystemClock::time_point until) {
  while (in_flight_[op]) {
    if (!TakeOne(until)) return false;
  }
  return true;
}

bool RawStream::StartedOk(SystemClock::time_point until) {
  return AwaitOp(kStart, until) && started_ok_;
}

bool RawStream::CanStartWrite(SystemClock::time_point until) {
  if (writes_done_ || finish_started_ || write_failed_) return false;
  if (!StartedOk(until) || !AwaitOp(kWrite, until)) return false;
  return !write_failed_;
}

bool RawStream::Write(const std::string& bytes, Wait wait) {
  const auto until = SystemClock::now() + wait;
  if (!CanStartWrite(until)) return false;
  grpc::Slice slice(bytes);
  write_buffer_ = grpc::ByteBuffer(&slice, 1);
  in_flight_[kWrite] = true;
  call_->Write(write_buffer_, reinterpret_cast<void*>(kWrite));
  return AwaitOp(kWrite, until) && !write_failed_;
}

bool RawStream::WritesDone(Wait wait) {
  const auto until = SystemClock::now() + wait;
  if (!CanStartWrite(until)) return false;
  writes_done_ = true;
  in_flight_[kWrite] = true;
  call_->WritesDone(reinterpret_cast<void*>(kWrite));
  return AwaitOp(kWrite, until) && !write_failed_;
}

std::optional<std::string> RawStream::Read(Wait wait) {
  const auto until = SystemClock::now() + wait;
  if (read_ended_ || finish_started_ || !StartedOk(until)) return std::nullopt;
  if (!in_flight_[kRead]) {
    in_flight_[kRead] = true;
    call_->Read(&read_buffer_, reinterpret_cast<void*>(kRead));
  }
  if (!AwaitOp(kRead, until) || read_ended_) return std::nullopt;
  std::vector<grpc::Slice> slices;
  std::string message;
  if (read_buffer_.Dump(&slices).ok()) {
    for (const grpc::Slice& s : slices) {
      message.append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
  }
  read_buffer_.Clear();
  return message;
}

std::optional<grpc::Status> RawStream::Finish(Wait wait) {
  const auto until = SystemClock::now() + wait;
  if (status_) return status_;
  if (!finish_started_) {
    if (!AwaitOp(kStart, until)) return std::nullopt;
    if (started_ok_) {
      // The status comes after the last message: read (and drop) until the end.
      while (!read_ended_) {
        if (!Read(std::chrono::duration_cast<Wait>(until - SystemClock::now()))) {
          if (!read_ended_) return std::nullopt;
        }
      }
    }
    // A write still in flight fails once the call has ended.
    if (!AwaitOp(kWrite, until)) return std::nullopt;
    finish_started_ = true;
    in_flight_[kFinish] = true;
    call_->Finish(&finish_status_, reinterpret_cast<void*>(kFinish));
  }
  if (!AwaitOp(kFinish, until)) return std::nullopt;
  return status_;
}

std::shared_ptr<grpc::Channel> LoopbackChannel(int port) {
  grpc::ChannelArguments arguments;
  // A channel of its own: channels with equal arguments otherwise share one connection.
  arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port),
                                   grpc::InsecureChannelCredentials(), arguments);
}

}  // namespace mulo::testing
