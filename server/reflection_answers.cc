#include "server/reflection_answers.h"

#include <google/protobuf/descriptor.pb.h>
#include <grpcpp/support/status.h>

#include <set>

#include "absl/strings/str_cat.h"
#include "server/client_text.h"

namespace mulo::server {
namespace {

using google::protobuf::DescriptorPool;
using google::protobuf::FileDescriptor;
using grpc::reflection::v1::ServerReflectionRequest;
using grpc::reflection::v1::ServerReflectionResponse;

void SetError(grpc::StatusCode code, const std::string& message,
              ServerReflectionResponse* response) {
  response->mutable_error_response()->set_error_code(static_cast<int32_t>(code));
  response->mutable_error_response()->set_error_message(message);
}

// `file`, then each of its dependencies depth-first, every file once: a client can build the
// whole file from one answer.
void AddFileAndDependencies(const FileDescriptor* file, std::set<std::string>* sent,
                            ServerReflectionResponse* response) {
  if (!sent->insert(file->name()).second) return;
  google::protobuf::FileDescriptorProto proto;
  file->CopyTo(&proto);
  response->mutable_file_descriptor_response()->add_file_descriptor_proto(
      proto.SerializeAsString());
  for (int i = 0; i < file->dependency_count(); ++i) {
    AddFileAndDependencies(file->dependency(i), sent, response);
  }
}

void AnswerWithFile(const FileDescriptor* file, ServerReflectionResponse* response) {
  std::set<std::string> sent;
  AddFileAndDependencies(file, &sent, response);
}

}  // namespace

ServerReflectionResponse AnswerReflectionRequest(const ServerReflectionRequest& request,
                                                 const std::vector<std::string>& services,
                                                 const DescriptorPool& pool) {
  ServerReflectionResponse response;
  response.set_valid_host(request.host());
  *response.mutable_original_request() = request;
  switch (request.message_request_case()) {
    case ServerReflectionRequest::kFileByFilename: {
      const FileDescriptor* file = pool.FindFileByName(request.file_by_filename());
      if (file == nullptr) {
        SetError(grpc::StatusCode::NOT_FOUND,
                 absl::StrCat("file_by_filename: no file ", Quoted(request.file_by_filename())),
                 &response);
      } else {
        AnswerWithFile(file, &response);
      }
      break;
    }
    case ServerReflectionRequest::kFileContainingSymbol: {
      const FileDescriptor* file = pool.FindFileContainingSymbol(request.file_containing_symbol());
      if (file == nullptr) {
        SetError(grpc::StatusCode::NOT_FOUND,
                 absl::StrCat("file_containing_symbol: no symbol ",
                              Quoted(request.file_containing_symbol())),
                 &response);
      } else {
        AnswerWithFile(file, &response);
      }
      break;
    }
    case ServerReflectionRequest::kFileContainingExtension: {
      const auto& extension = request.file_containing_extension();
      const auto* type = pool.FindMessageTypeByName(extension.containing_type());
      const auto* field = type == nullptr
                              ? nullptr
                              : pool.FindExtensionByNumber(type, extension.extension_number());
      if (type == nullptr) {
        SetError(grpc::StatusCode::NOT_FOUND,
                 absl::StrCat("file_containing_extension.containing_type: no message type ",
                              Quoted(extension.containing_type())),
                 &response);
      } else if (field == nullptr) {
        SetError(grpc::StatusCode::NOT_FOUND,
                 absl::StrCat("file_containing_extension.extension_number: ",
                              Quoted(extension.containing_type()), " has no extension ",
                              extension.extension_number()),
                 &response);
      } else {
        AnswerWithFile(field->file(), &response);
      }
      break;
    }
    case ServerReflectionRequest::kAllExtensionNumbersOfType: {
      const std::string& name = request.all_extension_numbers_of_type();
      const auto* type = pool.FindMessageTypeByName(name);
      if (type == nullptr) {
        SetError(grpc::StatusCode::NOT_FOUND,
                 absl::StrCat("all_extension_numbers_of_type: no message type ", Quoted(name)),
                 &response);
        break;
      }
      std::vector<const google::protobuf::FieldDescriptor*> extensions;
      pool.FindAllExtensions(type, &extensions);
      auto* numbers = response.mutable_all_extension_numbers_response();
      numbers->set_base_type_name(name);
      for (const auto* field : extensions) numbers->add_extension_number(field->number());
      break;
    }
    case ServerReflectionRequest::kListServices:
      for (const std::string& name : services) {
        response.mutable_list_services_response()->add_service()->set_name(name);
      }
      break;
    case ServerReflectionRequest::MESSAGE_REQUEST_NOT_SET:
      SetError(grpc::StatusCode::UNIMPLEMENTED,
               "message_request: set one of file_by_filename, file_containing_symbol, "
               "file_containing_extension, all_extension_numbers_of_type, list_services",
               &response);
      break;
  }
  return response;
}

}  // namespace mulo::server
