#!/usr/bin/env bash
# Fuzzes mulo's parsers with libFuzzer: builds tests/fuzz with clang-14, libFuzzer and
# AddressSanitizer (--config=fuzz, in a separate Bazel output base so the ordinary build and
# its cache are untouched), then runs each target for SECONDS (default 15) from its seed corpus
# (tests/fuzz/corpus/<target>). Prints each target's executions; a crash, leak or timeout
# leaves its input in out/fuzz/<target>/ and fails. New coverage-increasing inputs collect in
# out/fuzz/<target>/corpus (not committed; copy a reproducer into tests/fuzz/corpus/<target>/
# to keep it as a regression test).
#   tools/fuzz.sh                        CI: every target x 15 s
#   tools/fuzz.sh 600                    longer runs
#   tools/fuzz.sh 600 grpc_surface_fuzzer   only the named targets
set -uo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-15}
targets=(safetensors_fuzzer config_fuzzer request_fuzzer caption_fuzzer grpc_surface_fuzzer
         openai_images_fuzzer)
if (($# > 1)); then
  for target in "${@:2}"; do
    [[ " ${targets[*]} " == *" $target "* ]] ||
      { echo "fuzz: no target $target (targets: ${targets[*]})" >&2; exit 2; }
  done
  targets=("${@:2}")
fi
# One output base per checkout (an output base belongs to one workspace); the shared disk cache
# of .bazelrc still makes a fresh clone's fuzz build cheap.
bazel_fuzz=(bazel --output_base="$HOME/.cache/mulo-bazel-fuzz/$(pwd | md5sum | cut -c1-12)")
if ! "${bazel_fuzz[@]}" build --config=fuzz --symlink_prefix=/ //tests/fuzz:all \
    >/tmp/mulo-fuzz-build.log 2>&1; then
  echo "fuzz: build failed; the last lines of /tmp/mulo-fuzz-build.log:" >&2
  tail -20 /tmp/mulo-fuzz-build.log >&2
  exit 1
fi
bin=$("${bazel_fuzz[@]}" info --config=fuzz bazel-bin 2>/dev/null)/tests/fuzz
status=0
for target in "${targets[@]}"; do
  work=out/fuzz/$target
  mkdir -p "$work/corpus"
  log=$work/fuzz.log
  # -rss_limit_mb: LibTorch alone maps a few hundred MB. -timeout: one input, seconds.
  "$bin/$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 \
      -artifact_prefix="$work/" -print_final_stats=1 "$work/corpus" "tests/fuzz/corpus/$target" \
      >"$log" 2>&1
  rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  if ((rc != 0)); then
    echo "fuzz: $target FAILED after ${runs:-?} executions; see $log and $work/" >&2
    grep -m5 -E "ERROR|SUMMARY|==[0-9]+==" "$log" >&2
    status=1
  else
    echo "fuzz: $target ${runs:-?} executions in ${seconds} s, no crash"
  fi
done
exit $status
