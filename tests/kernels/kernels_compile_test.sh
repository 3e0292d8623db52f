#!/usr/bin/env bash
# tools/build_engine.sh --kernels_only: the fused kernels compile with the machine's nvcc for
# the GPUs the project serves on (sm_80, sm_90), and fused_ops.cc compiles in its CUDA form.
# The control: a kernel source with a type error must make the dry run fail.
set -euo pipefail
cd "${TEST_SRCDIR}/${TEST_WORKSPACE}"
fail() { echo "FAIL: $*" >&2; exit 1; }
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
[[ -x "$nvcc" ]] || fail "no nvcc at $nvcc: the machine's CUDA toolkit is needed (set NVCC)"
export NVCC=$nvcc
tools/build_engine.sh --kernels_only "$TEST_TMPDIR/out" | tee "$TEST_TMPDIR/log"
grep -q "kernels compiled by" "$TEST_TMPDIR/log" || fail "no kernels compiled"
object=$TEST_TMPDIR/out/obj/engine_kernels_fused_kernels.cu.o
[[ -s "$object" ]] || fail "no object at $object"
# Machine code for both architectures, and the launchers the engine calls.
cuobjdump=$(command -v cuobjdump || echo "${CUDA_HOME:-/usr/local/cuda}/bin/cuobjdump")
if [[ -x "$cuobjdump" ]]; then
  "$cuobjdump" --list-elf "$object" > "$TEST_TMPDIR/elf"
  for arch in sm_80 sm_90; do grep -q "$arch" "$TEST_TMPDIR/elf" || fail "no $arch code"; done
fi
nm -C "$object" > "$TEST_TMPDIR/symbols"
for symbol in LaunchGemv LaunchAttention LaunchGuidedDraw AttentionSplits; do
  grep -q " T mulo::engine::kernels::$symbol(" "$TEST_TMPDIR/symbols" || fail "no $symbol"
done

# The control: the same tree with a broken kernel fails the dry run.
broken=$TEST_TMPDIR/broken
mkdir -p "$broken"
cp -rL engine tools "$broken/"
chmod -R u+w "$broken"
sed -i 's/const float gate = Round<T>/const float gate = Round<T, T>/' \
  "$broken/engine/kernels/fused_kernels.cu"
grep -q "Round<T, T>" "$broken/engine/kernels/fused_kernels.cu" || fail "the control's edit"
if "$broken/tools/build_engine.sh" --kernels_only "$TEST_TMPDIR/broken_out" \
    > "$TEST_TMPDIR/broken.log" 2>&1; then
  fail "a broken kernel passed the dry run"
fi
grep -q "FAILED engine/kernels/fused_kernels.cu" "$TEST_TMPDIR/broken.log" ||
  { cat "$TEST_TMPDIR/broken.log"; fail "the broken kernel's failure was not reported"; }
echo "PASS: kernels compiled; the broken control failed"
