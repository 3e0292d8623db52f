# Sourced by the scripts that decode on the CPU (tools/test.sh, tools/serve_and_generate.sh).
# OpenBLAS picks its kernels from the CPU's model number and falls back to its generic SSE3
# ones for a model it does not know, as on many virtual machines, AVX-512 or not. Its
# SkylakeX kernels decoded ar 1.6-2.2x faster on such a machine, with the same tokens
# (engine/core/blas_kernels.h, docs/benchmarks.md). A value already set is kept.
if [[ -z "${OPENBLAS_CORETYPE:-}" ]] && grep -qw avx512f /proc/cpuinfo 2>/dev/null; then
  export OPENBLAS_CORETYPE=SkylakeX
fi
