#!/usr/bin/env bash
# The one command that runs every test (README, .ci/run): installs what is missing, then builds
# everything, runs all tests, then fuzzes the parsers for a minute. Extra arguments go to
# `bazel test`.
set -uo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh || exit 1
# Results of earlier runs (a test since removed, a manual test run by hand) must not be
# counted below.
find -L bazel-testlogs/ -name test.xml -delete 2>/dev/null || true
# --nocache_test_results: tests always run, even when the shared disk cache holds a result.
# The build event file says, per target, its status (a timeout or a crash included), its size
# and how long it ran.
mkdir -p out/test
events=out/test/build_events.json
rm -f "$events"
# OpenBLAS's fast kernels where it would pick its generic ones (the tokens are the same).
source tools/blas_env.sh
blas_env=()
[[ -n "${OPENBLAS_CORETYPE:-}" ]] && blas_env=(--test_env=OPENBLAS_CORETYPE)
# Include what is used (docs/design.md, "Build"): <torch/torch.h> costs every file that
# includes it 17 s of a core, twice <torch/types.h>.
heavy=$(grep -rln --include='*.cc' --include='*.h' '#include <torch/torch.h>' \
          engine server client bench tests synth text tools 2>/dev/null)
if [[ -n "$heavy" ]]; then
  echo "FAIL: these include <torch/torch.h>; include <torch/types.h> or the ATen header used:" \
       $heavy >&2
  exit 1
fi
bazel test //... --nocache_test_results --build_event_json_file="$events" "${blas_env[@]}" "$@"
status=$?

# Targets first: a target that timed out or crashed has no failed case of its own.
/usr/bin/python3 tools/test_summary.py "$events" || status=1

# Then the test cases, from each target's JUnit XML.
passed=0
failed=0
skipped=0
while IFS= read -r xml; do
  line=$(grep -m1 -o '<testsuites [^>]*>' "$xml" || true)
  tests=$(sed -n 's/.* tests="\([0-9]*\)".*/\1/p' <<<"$line")
  failures=$(sed -n 's/.* failures="\([0-9]*\)".*/\1/p' <<<"$line")
  errors=$(sed -n 's/.* errors="\([0-9]*\)".*/\1/p' <<<"$line")
  skips=$(grep -c '<skipped' "$xml" || true)
  bad=$(( ${failures:-0} + ${errors:-0} ))
  passed=$(( passed + ${tests:-0} - bad - ${skips:-0} ))
  failed=$(( failed + bad ))
  skipped=$(( skipped + ${skips:-0} ))
done < <(find -L bazel-testlogs/ -name test.xml 2>/dev/null)
# Skipped cases are the GPU suite on a machine without a CUDA device.
echo "test cases: ${passed} passed, ${failed} failed, ${skipped} skipped"

# The parsers and the gRPC surface under libFuzzer for a bounded time (6 targets x 15 s;
# tools/fuzz.sh 600 for longer runs). The seed corpora already ran above as the tests/fuzz replay tests.
tools/fuzz.sh 15 || status=1
exit $status
