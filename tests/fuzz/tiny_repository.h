// The tiny test family (tests/data/repository), loaded once per fuzzer process and never freed
// (libFuzzer exits from inside its loop). Run from the repository root or the runfiles.
#ifndef MULO_TESTS_FUZZ_TINY_REPOSITORY_H_
#define MULO_TESTS_FUZZ_TINY_REPOSITORY_H_

#include <cstdlib>

#include "engine/model/model_set.h"
#include "server/model_repository.h"

namespace mulo::testing {

inline const server::ModelRepository& TinyRepository() {
  static const server::ModelRepository* repository = [] {
    auto loaded = server::ModelRepository::Load("tests/data/repository", engine::LoadOptions());
    if (!loaded.ok()) std::abort();
    return loaded->release();
  }();
  return *repository;
}

}  // namespace mulo::testing

#endif  // MULO_TESTS_FUZZ_TINY_REPOSITORY_H_
