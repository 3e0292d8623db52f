// Typed, validated reads of JSON config fields with errors that name the file and the field.
#ifndef MULO_ENGINE_MODEL_JSON_FIELDS_H_
#define MULO_ENGINE_MODEL_JSON_FIELDS_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/core/status.h"

namespace mulo::engine {

class JsonFields {
 public:
  // `source` names the document in messages (usually the file path).
  JsonFields(const nlohmann::json& doc, std::string source)
      : doc_(doc), source_(std::move(source)) {}

  // Parses a JSON file; errors name the file. With `object`, the document must be an object.
  static StatusOr<nlohmann::json> ParseFile(const std::string& path, bool object = true);

  bool Has(const std::string& field) const { return doc_.contains(field); }

  // Integers in [min, max]; a missing field without a default is an error.
  StatusOr<int64_t> Int(const std::string& field, int64_t min, int64_t max) const;
  StatusOr<int64_t> Int(const std::string& field, int64_t min, int64_t max,
                        int64_t default_value) const;
  StatusOr<double> Number(const std::string& field, double min, double max,
                          double default_value) const;
  StatusOr<bool> Bool(const std::string& field, bool default_value) const;
  // A string that must be one of `allowed`.
  StatusOr<std::string> Enum(const std::string& field,
                             const std::vector<std::string>& allowed) const;
  StatusOr<std::vector<int64_t>> IntList(const std::string& field, int64_t min,
                                         int64_t max) const;

  Status Error(const std::string& field, const std::string& problem) const {
    return InvalidArgumentError(source_ + ": field '" + field + "': " + problem);
  }

 private:
  const nlohmann::json& doc_;
  std::string source_;
};

}  // namespace mulo::engine

#endif  // MULO_ENGINE_MODEL_JSON_FIELDS_H_
