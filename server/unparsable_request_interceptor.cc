#include "server/unparsable_request_interceptor.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace mulo::server {
namespace {

using grpc::experimental::InterceptionHookPoints;

class UnparsableRequestInterceptor : public grpc::experimental::Interceptor {
 public:
  UnparsableRequestInterceptor(std::string method,
                               const UnparsableRequestInterceptorFactory::Report* report)
      : method_(std::move(method)), report_(report) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE)) {
      // Null exactly when deserialization failed (the handler then runs with that status).
      parsed_ = methods->GetRecvMessage() != nullptr;
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS) &&
        !parsed_ && (methods->GetSendStatus().error_code() == grpc::StatusCode::INTERNAL ||
                     methods->GetSendStatus().error_code() == grpc::StatusCode::UNIMPLEMENTED)) {
      const grpc::Status status(grpc::StatusCode::INVALID_ARGUMENT,
                                UnparsableRequestMessage(method_));
      methods->ModifySendStatus(status);
      if (*report_) (*report_)(method_, status);
    }
    methods->Proceed();
  }

 private:
  const std::string method_;
  const UnparsableRequestInterceptorFactory::Report* const report_;
  bool parsed_ = false;
};

}  // namespace

UnparsableRequestInterceptorFactory::UnparsableRequestInterceptorFactory(
    std::string service_prefix, Report on_unparsable)
    : service_prefix_(std::move(service_prefix)), on_unparsable_(std::move(on_unparsable)) {}

grpc::experimental::Interceptor* UnparsableRequestInterceptorFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  // Every method of ours takes exactly one request message; streams of requests would need
  // per-message bookkeeping.
  if (info->type() == grpc::experimental::ServerRpcInfo::Type::CLIENT_STREAMING ||
      info->type() == grpc::experimental::ServerRpcInfo::Type::BIDI_STREAMING ||
      !absl::StartsWith(info->method(), service_prefix_)) {
    return nullptr;
  }
  return new UnparsableRequestInterceptor(info->method(), &on_unparsable_);
}

std::string UnparsableRequestMessage(const std::string& method) {
  // "/mulo.v1.ImageGeneration/Generate" -> "mulo.v1.GenerateRequest".
  const size_t slash = method.rfind('/');
  const size_t dot = method.rfind('.', slash);
  const std::string package =
      dot == std::string::npos || slash == std::string::npos ? "" : method.substr(1, dot);
  const std::string message =
      slash == std::string::npos ? "request" : absl::StrCat(package, method.substr(slash + 1),
                                                            "Request");
  return UnparsableMessageText(message);
}

std::string UnparsableMessageText(const std::string& message_type) {
  return absl::StrCat("request: the bytes are not a valid ", message_type,
                      " (truncated or mistyped fields, or invalid UTF-8 in a string field)");
}

}  // namespace mulo::server
