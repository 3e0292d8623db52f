#include "client/method_text.h"

#include <cstdint>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "mulo/v1/method_names.h"

namespace mulo::client {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::EnumDescriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

// An enum's settable values in lower case (UNSPECIFIED, number 0, keeps the default).
std::vector<std::string> EnumNames(const EnumDescriptor& type) {
  std::vector<std::string> names;
  for (int i = 0; i < type.value_count(); ++i) {
    if (type.value(i)->number() != 0) names.push_back(absl::AsciiStrToLower(type.value(i)->name()));
  }
  return names;
}

std::string KindOf(const FieldDescriptor& field) {
  switch (field.cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
    case FieldDescriptor::CPPTYPE_INT64:
    case FieldDescriptor::CPPTYPE_UINT32:
    case FieldDescriptor::CPPTYPE_UINT64: return "integer";
    case FieldDescriptor::CPPTYPE_FLOAT:
    case FieldDescriptor::CPPTYPE_DOUBLE: return "number";
    case FieldDescriptor::CPPTYPE_BOOL: return "true | false";
    case FieldDescriptor::CPPTYPE_ENUM: return absl::StrJoin(EnumNames(*field.enum_type()), " | ");
    default: return "unsupported";
  }
}

// "tau (number)" for every leaf field of `type`, nested ones as "tree.top_k".
void ListOptions(const Descriptor& type, const std::string& prefix,
                 std::vector<std::string>* options) {
  for (int i = 0; i < type.field_count(); ++i) {
    const FieldDescriptor& field = *type.field(i);
    if (field.cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      ListOptions(*field.message_type(), prefix + field.name() + ".", options);
    } else {
      options->push_back(absl::StrCat(prefix, field.name(), " (", KindOf(field), ")"));
    }
  }
}

std::string OptionNames(const Descriptor& type) {
  std::vector<std::string> options;
  ListOptions(type, "", &options);
  for (std::string& option : options) option = option.substr(0, option.find(' '));
  return options.empty() ? "it has none" : absl::StrJoin(options, ", ");
}

absl::Status SetField(const std::string& method, Message* options, const std::string& name,
                      const std::string& value) {
  const Descriptor& root = *options->GetDescriptor();
  auto unknown = [&] {
    return absl::InvalidArgumentError(absl::StrCat("--method: '", name, "' is not an option of ",
                                                   method, " (", OptionNames(root), ")"));
  };
  Message* at = options;
  std::vector<std::string> path = absl::StrSplit(name, '.');
  for (size_t i = 0; i + 1 < path.size(); ++i) {
    const FieldDescriptor* group = at->GetDescriptor()->FindFieldByName(path[i]);
    if (group == nullptr || group->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE) {
      return unknown();
    }
    at = at->GetReflection()->MutableMessage(at, group);
  }
  const FieldDescriptor* field = at->GetDescriptor()->FindFieldByName(path.back());
  if (field == nullptr || field->is_repeated()) return unknown();
  const auto* r = at->GetReflection();
  auto bad = [&] {
    return absl::InvalidArgumentError(absl::StrCat("--method: ", method, ".", name, "=", value,
                                                   ": expected ", KindOf(*field)));
  };
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32: {
      int32_t v;
      if (!absl::SimpleAtoi(value, &v)) return bad();
      r->SetInt32(at, field, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_INT64: {
      int64_t v;
      if (!absl::SimpleAtoi(value, &v)) return bad();
      r->SetInt64(at, field, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_UINT32: {
      uint32_t v;
      if (!absl::SimpleAtoi(value, &v)) return bad();
      r->SetUInt32(at, field, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_UINT64: {
      uint64_t v;
      if (!absl::SimpleAtoi(value, &v)) return bad();
      r->SetUInt64(at, field, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_DOUBLE: {
      double v;
      if (!absl::SimpleAtod(value, &v)) return bad();
      r->SetDouble(at, field, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_FLOAT: {
      float v;
      if (!absl::SimpleAtof(value, &v)) return bad();
      r->SetFloat(at, field, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_BOOL:
      if (value != "true" && value != "false") return bad();
      r->SetBool(at, field, value == "true");
      break;
    case FieldDescriptor::CPPTYPE_ENUM: {
      const auto* found = field->enum_type()->FindValueByName(absl::AsciiStrToUpper(value));
      if (found == nullptr || found->number() == 0) return bad();
      r->SetEnumValue(at, field, found->number());
      break;
    }
    default:
      return unknown();
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status SetMethodFromText(absl::string_view text, v1::GenerateRequest* request) {
  std::vector<std::string> parts = absl::StrSplit(text, ':');
  const std::string& method = parts[0];
  const FieldDescriptor* oneof_field = v1::ApiMethodField(method);
  if (oneof_field == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("--method: '", method, "' is not a method of the API (",
                     absl::StrJoin(v1::ApiMethodNames(), ", "), ")"));
  }
  Message* options = request->GetReflection()->MutableMessage(request, oneof_field);
  for (size_t i = 1; i < parts.size(); ++i) {
    const size_t equals = parts[i].find('=');
    if (equals == std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("--method: expected ", method, ":name=value:..., got '", parts[i], "'"));
    }
    if (absl::Status set = SetField(method, options, parts[i].substr(0, equals),
                                    parts[i].substr(equals + 1));
        !set.ok()) {
      return set;
    }
  }
  return absl::OkStatus();
}

std::string MethodOptionsHelp() {
  std::string help;
  for (int i = 0; i < v1::MethodOneof().field_count(); ++i) {
    const FieldDescriptor& field = *v1::MethodOneof().field(i);
    std::vector<std::string> options;
    ListOptions(*field.message_type(), "", &options);
    absl::StrAppend(&help, "  ", v1::ApiMethodName(field), ": ",
                    options.empty() ? "no options" : absl::StrJoin(options, ", "), "\n");
  }
  return help;
}

}  // namespace mulo::client
