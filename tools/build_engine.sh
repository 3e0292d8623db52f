#!/usr/bin/env bash
# Builds the engine and its benchmark without Bazel, against any LibTorch: for GPU machines
# that have a PyTorch install but no Bazel, gRPC or Abseil (DESIGN.md section 6).
#
#   tools/build_engine.sh [OUT_DIR]
#     LIBTORCH=/path/to/libtorch   directory with include/ and lib/ (default: the torch package
#                                  of `python3`, else Debian's libtorch-dev)
#     NLOHMANN_INCLUDE=/path       directory holding nlohmann/json.hpp (default /usr/include)
#     CXX=g++  JOBS=$(nproc)
# Produces OUT_DIR/libmulo_engine.a and OUT_DIR/ar_bench (default OUT_DIR: out/engine).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-out/engine}
cxx=${CXX:-g++}
jobs=${JOBS:-$(nproc)}

if [[ -z "${LIBTORCH:-}" ]]; then
  LIBTORCH=$(python3 -c 'import torch, os; print(os.path.dirname(torch.__file__))' 2>/dev/null || true)
  [[ -d "$LIBTORCH/include/torch" ]] || LIBTORCH=""
fi
if [[ -n "${LIBTORCH:-}" ]]; then
  includes=(-isystem "$LIBTORCH/include" -isystem "$LIBTORCH/include/torch/csrc/api/include")
  libdir="$LIBTORCH/lib"
  # The ABI of the LibTorch build decides ours (PyTorch wheels before 2.x used the old ABI).
  abi=$(python3 -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))' 2>/dev/null || echo 1)
else
  includes=(-isystem /usr/include/torch/csrc/api/include)
  libdir=/usr/lib/$(gcc -print-multiarch)
  abi=1
fi
nlohmann=${NLOHMANN_INCLUDE:-/usr/include}
[[ -f "$nlohmann/nlohmann/json.hpp" ]] || {
  echo "build_engine: nlohmann/json.hpp not found under $nlohmann; set NLOHMANN_INCLUDE" >&2
  exit 1
}
# /usr/include is already on the default path; adding it with -isystem breaks #include_next.
[[ "$nlohmann" == /usr/include ]] || includes+=(-isystem "$nlohmann")

libs=(-L"$libdir" -Wl,-rpath,"$libdir")
defines=(-D_GLIBCXX_USE_CXX11_ABI="$abi")
if [[ -f "$libdir/libtorch_cuda.so" ]]; then
  libs+=(-Wl,--no-as-needed -ltorch_cuda -lc10_cuda -Wl,--as-needed)
  defines+=(-DMULO_WITH_CUDA=1)
fi
libs+=(-ltorch -ltorch_cpu -lc10 -lpthread)

mkdir -p "$out/obj"
flags=(-std=c++17 -O2 -fPIC -I. "${includes[@]}" "${defines[@]}")
mapfile -t sources < <(find engine -name '*.cc' | sort)
echo "build_engine: ${#sources[@]} engine sources, LibTorch at ${LIBTORCH:-Debian}, ABI $abi"
printf '%s\n' "${sources[@]}" | xargs -P "$jobs" -I{} sh -c \
  'o="$0/obj/$(echo {} | tr / _).o"; '"$cxx"' "$@" -c {} -o "$o"' "$out" "${flags[@]}"
rm -f "$out/libmulo_engine.a"
ar rcs "$out/libmulo_engine.a" "$out"/obj/*.o
"$cxx" "${flags[@]}" bench/ar_bench.cc "$out/libmulo_engine.a" "${libs[@]}" -o "$out/ar_bench"
echo "build_engine: built $out/libmulo_engine.a and $out/ar_bench"
