// The decoding methods of the wire contract by name: the fields of GenerateRequest's `method`
// oneof, spelled as the engine's method registry spells them ("lantern_plus_plus" is
// "lantern++"). Shared by the server (request -> registry name) and the client (--method ->
// oneof field), so neither keeps its own list.
#ifndef MULO_PROTO_MULO_V1_METHOD_NAMES_H_
#define MULO_PROTO_MULO_V1_METHOD_NAMES_H_

#include <string>
#include <vector>

#include "mulo/v1/image_generation.pb.h"

namespace mulo::v1 {

inline const google::protobuf::OneofDescriptor& MethodOneof() {
  return *GenerateRequest::descriptor()->FindOneofByName("method");
}

inline std::string ApiMethodName(const google::protobuf::FieldDescriptor& field) {
  const std::string& name = field.name();
  const size_t plus = name.find("_plus_plus");
  return plus == std::string::npos ? name : name.substr(0, plus) + "++";
}

// Every method of the API, in the proto's order.
inline std::vector<std::string> ApiMethodNames() {
  std::vector<std::string> names;
  for (int i = 0; i < MethodOneof().field_count(); ++i) {
    names.push_back(ApiMethodName(*MethodOneof().field(i)));
  }
  return names;
}

// The oneof field of method `name`, or null when the API has no such method.
inline const google::protobuf::FieldDescriptor* ApiMethodField(const std::string& name) {
  for (int i = 0; i < MethodOneof().field_count(); ++i) {
    if (ApiMethodName(*MethodOneof().field(i)) == name) return MethodOneof().field(i);
  }
  return nullptr;
}

// The method a request asks for; "ar" when it sets none.
inline std::string RequestMethodName(const GenerateRequest& request) {
  const auto* field = request.GetReflection()->GetOneofFieldDescriptor(request, &MethodOneof());
  return field == nullptr ? "ar" : ApiMethodName(*field);
}

}  // namespace mulo::v1

#endif  // MULO_PROTO_MULO_V1_METHOD_NAMES_H_
