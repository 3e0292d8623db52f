#include "engine/model/json_fields.h"

#include <fstream>
#include <sstream>

namespace mulo::engine {

StatusOr<nlohmann::json> JsonFields::ParseFile(const std::string& path, bool object) {
  std::ifstream in(path);
  if (!in) return NotFoundError(path + ": cannot open");
  std::stringstream text;
  text << in.rdbuf();
  try {
    nlohmann::json doc = nlohmann::json::parse(text.str());
    if (object && !doc.is_object()) {
      return InvalidArgumentError(path + ": expected a JSON object");
    }
    return doc;
  } catch (const nlohmann::json::exception& e) {
    // Not only parse_error: a number too large for a double ("1E5555") is out_of_range.
    return InvalidArgumentError(path + ": malformed JSON: " + e.what());
  }
}

StatusOr<int64_t> JsonFields::Int(const std::string& field, int64_t min, int64_t max) const {
  if (!Has(field)) return Error(field, "missing");
  const auto& v = doc_[field];
  if (!v.is_number_integer()) return Error(field, "expected an integer, found " + v.dump());
  const int64_t x = v.get<int64_t>();
  if (x < min || x > max) {
    return Error(field, std::to_string(x) + " is outside [" + std::to_string(min) + ", " +
                            std::to_string(max) + "]");
  }
  return x;
}

StatusOr<int64_t> JsonFields::Int(const std::string& field, int64_t min, int64_t max,
                                  int64_t default_value) const {
  if (!Has(field) || doc_[field].is_null()) return default_value;
  return Int(field, min, max);
}

StatusOr<double> JsonFields::Number(const std::string& field, double min, double max,
                                    double default_value) const {
  if (!Has(field) || doc_[field].is_null()) return default_value;
  const auto& v = doc_[field];
  if (!v.is_number()) return Error(field, "expected a number, found " + v.dump());
  const double x = v.get<double>();
  if (!(x >= min && x <= max)) {
    std::ostringstream msg;
    msg << x << " is outside [" << min << ", " << max << "]";
    return Error(field, msg.str());
  }
  return x;
}

StatusOr<bool> JsonFields::Bool(const std::string& field, bool default_value) const {
  if (!Has(field) || doc_[field].is_null()) return default_value;
  if (!doc_[field].is_boolean()) return Error(field, "expected true or false");
  return doc_[field].get<bool>();
}

StatusOr<std::string> JsonFields::Enum(const std::string& field,
                                       const std::vector<std::string>& allowed) const {
  std::string options;
  for (const auto& a : allowed) options += (options.empty() ? "" : ", ") + a;
  if (!Has(field)) return Error(field, "missing (one of: " + options + ")");
  const auto& v = doc_[field];
  if (v.is_string()) {
    for (const auto& a : allowed) {
      if (v.get<std::string>() == a) return a;
    }
  }
  return Error(field, v.dump() + " is not one of: " + options);
}

StatusOr<std::vector<int64_t>> JsonFields::IntList(const std::string& field, int64_t min,
                                                   int64_t max) const {
  if (!Has(field)) return Error(field, "missing");
  const auto& v = doc_[field];
  if (!v.is_array() || v.empty()) return Error(field, "expected a non-empty list of integers");
  std::vector<int64_t> out;
  for (const auto& x : v) {
    if (!x.is_number_integer() || x.get<int64_t>() < min || x.get<int64_t>() > max) {
      return Error(field, "entries must be integers in [" + std::to_string(min) + ", " +
                              std::to_string(max) + "], found " + x.dump());
    }
    out.push_back(x.get<int64_t>());
  }
  return out;
}

}  // namespace mulo::engine
