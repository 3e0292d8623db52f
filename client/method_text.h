// A method and its options written as text, "lantern:k=4:delta=0.2:tree.static_tree=true"
// (the syntax of methods_bench's --rows): the method's name, then name=value settings of the
// fields of its options message, nested fields with dots. Everything goes through the proto's
// descriptor, so the client keeps no list of methods or options: the proto is that list, and
// the server's method specs are tested against it (request_validation_test). Bounds are the
// server's to check; it refuses a value out of bounds naming the field.
#ifndef MULO_CLIENT_METHOD_TEXT_H_
#define MULO_CLIENT_METHOD_TEXT_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "mulo/v1/image_generation.pb.h"

namespace mulo::client {

// Selects the method `text` names in the request's oneof and sets its options. Values: numbers
// for numeric fields, true / false, an enum value's name in any case ("wavefront").
// INVALID_ARGUMENT naming the method or the option otherwise.
absl::Status SetMethodFromText(absl::string_view text, v1::GenerateRequest* request);

// Every method of the API with its options, one method per line:
// "  sjd: window (integer), init (random | repeat_horizon)".
std::string MethodOptionsHelp();

}  // namespace mulo::client

#endif  // MULO_CLIENT_METHOD_TEXT_H_
