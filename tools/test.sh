#!/usr/bin/env bash
# The one command that runs every test (README, .ci/run): installs what is missing, then builds
# everything and runs all tests. Extra arguments go to `bazel test`.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
# --nocache_test_results: tests always run, even when the shared disk cache holds a result.
bazel test //... --nocache_test_results "$@"
