// A minimal --name=value parser for the benchmark programs. They must build with nothing but
// the engine and LibTorch (tools/build_engine.sh on GPU machines), so they cannot use Abseil.
#ifndef MULO_BENCH_BENCH_FLAGS_H_
#define MULO_BENCH_BENCH_FLAGS_H_

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace mulo::bench {

class FlagParser {
 public:
  explicit FlagParser(std::string usage) : usage_(std::move(usage)) {}

  void Add(const std::string& name, std::string* value, const std::string& help) {
    Register(name, help, *value, [value](const std::string& v) { *value = v; return true; });
  }
  void Add(const std::string& name, int* value, const std::string& help) {
    Register(name, help, std::to_string(*value), [value](const std::string& v) {
      char* end = nullptr;
      const long x = std::strtol(v.c_str(), &end, 10);
      if (end == v.c_str() || *end != '\0') return false;
      *value = static_cast<int>(x);
      return true;
    });
  }
  void Add(const std::string& name, double* value, const std::string& help) {
    Register(name, help, std::to_string(*value), [value](const std::string& v) {
      char* end = nullptr;
      const double x = std::strtod(v.c_str(), &end);
      if (end == v.c_str() || *end != '\0') return false;
      *value = x;
      return true;
    });
  }

  // Exits 0 after printing the usage on --help; false (after printing why) on a bad flag.
  bool Parse(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
      std::string arg = argv[i];
      if (arg == "--help" || arg == "-h") {
        PrintUsage();
        std::exit(0);
      }
      const auto eq = arg.find('=');
      const std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
      auto it = flags_.find(name);
      if (arg.rfind("--", 0) != 0 || eq == std::string::npos || it == flags_.end()) {
        std::fprintf(stderr, "unknown or malformed flag '%s' (use --name=value)\n", arg.c_str());
        PrintUsage();
        return false;
      }
      if (!it->second.set(arg.substr(eq + 1))) {
        std::fprintf(stderr, "bad value for --%s: '%s'\n", name.c_str(),
                     arg.substr(eq + 1).c_str());
        return false;
      }
    }
    return true;
  }

 private:
  struct Flag {
    std::string help;
    std::string default_value;
    std::function<bool(const std::string&)> set;
  };

  void Register(const std::string& name, const std::string& help, const std::string& def,
                std::function<bool(const std::string&)> set) {
    flags_[name] = Flag{help, def, std::move(set)};
  }

  void PrintUsage() const {
    std::fprintf(stderr, "%s\n", usage_.c_str());
    for (const auto& [name, flag] : flags_) {
      std::fprintf(stderr, "  --%s=%s\n      %s\n", name.c_str(), flag.default_value.c_str(),
                   flag.help.c_str());
    }
  }

  std::string usage_;
  std::map<std::string, Flag> flags_;
};

// A list flag such as --concurrency=1,4,8: appends the non-negative counts to `out`; false on
// an empty list or an item that is not a count.
inline bool ParseList(const std::string& text, std::vector<int64_t>* out) {
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) {
    char* end = nullptr;
    const long long value = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || value < 0) return false;
    out->push_back(value);
  }
  return !out->empty();
}

}  // namespace mulo::bench

#endif  // MULO_BENCH_BENCH_FLAGS_H_
