#!/usr/bin/env bash
# Builds the engine and the programs that need no server without Bazel, against any LibTorch:
# for GPU machines that have a PyTorch install (with CUDA) but no Bazel, gRPC or Debian's
# libraries (docs/design.md, "Build"; tools/gpu/run.sh calls it there).
#
#   tools/build_engine.sh [OUT_DIR]
#     LIBTORCH=/path/to/libtorch   directory with include/ and lib/ (default: the torch package
#                                  of `python3`, else Debian's libtorch-dev)
#     NLOHMANN_INCLUDE=/path       directory holding nlohmann/json.hpp (default /usr/include,
#                                  else .gpu/include from tools/gpu/fetch_deps.sh)
#     DEPS_DEBS=/path              Debian packages of Abseil and OpenCV to unpack when the
#                                  system has none (default .gpu/debs, tools/gpu/fetch_deps.sh)
#     CXX=g++  JOBS=$(nproc)  CXXSTD=c++17
# Always builds OUT_DIR/libmulo_engine.a and OUT_DIR/ar_bench (default OUT_DIR: out/engine);
# with GoogleTest also OUT_DIR/gpu_engine_test; with Abseil and OpenCV also OUT_DIR/methods_bench.
# With a CUDA LibTorch, MULO_WITH_CUDA is defined (CUDA graphs). Objects are rebuilt only when
# a source or a header it includes changed.
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
[[ -f "$nlohmann/nlohmann/json.hpp" ]] || nlohmann=$PWD/.gpu/include
[[ -f "$nlohmann/nlohmann/json.hpp" ]] || {
  echo "build_engine: nlohmann/json.hpp not found; set NLOHMANN_INCLUDE or run tools/gpu/fetch_deps.sh" >&2
  exit 1
}
# /usr/include is already on the default path; adding it with -isystem breaks #include_next.
[[ "$nlohmann" == /usr/include ]] || includes+=(-isystem "$nlohmann")

libs=(-L"$libdir" -Wl,-rpath,"$libdir")
defines=(-D_GLIBCXX_USE_CXX11_ABI="$abi")
if [[ -f "$libdir/libtorch_cuda.so" ]]; then
  libs+=(-Wl,--no-as-needed -ltorch_cuda -lc10_cuda -Wl,--as-needed)
  defines+=(-DMULO_WITH_CUDA=1)
  # ATen's CUDA headers (CUDA graphs) include the CUDA runtime's.
  for cuda_include in "${CUDA_HOME:-/usr/local/cuda}/include" \
      "$(dirname "$LIBTORCH")"/nvidia/cu*/include "$(dirname "$LIBTORCH")"/nvidia/cuda_runtime/include; do
    if [[ -f "$cuda_include/cuda_runtime_api.h" ]]; then
      includes+=(-isystem "$cuda_include")
      break
    fi
  done
  # ...and the graph code calls the CUDA runtime itself, so it is linked by name.
  for cuda_lib in "$(dirname "$LIBTORCH")"/nvidia/cu*/lib "${CUDA_HOME:-/usr/local/cuda}/lib64"; do
    if compgen -G "$cuda_lib/libcudart.so*" >/dev/null; then
      [[ -f "$cuda_lib/libcudart.so" ]] || cudart=-l:$(basename "$(ls "$cuda_lib"/libcudart.so.* | head -1)")
      libs+=(-L"$cuda_lib" -Wl,-rpath,"$cuda_lib" "${cudart:--lcudart}")
      break
    fi
  done
fi
libs+=(-ltorch -ltorch_cpu -lc10 -lpthread)

mkdir -p "$out/obj"
flags=(-std="${CXXSTD:-c++17}" -O2 -fPIC -I. "${includes[@]}" "${defines[@]}")

# compile SRC...: objects under $out/obj, rebuilt when the source or an included file changed.
compile() {
  printf '%s\n' "$@" | xargs -P "$jobs" -I{} bash -c '
    src={}; o="$0/obj/$(echo "$src" | tr / _).o"; d="${o%.o}.d"
    if [[ -f "$o" && -f "$d" ]]; then
      stale=0
      for dep in $(sed -e "s/^[^:]*://" -e "s/\\\\$//" "$d"); do
        [[ "$dep" -nt "$o" ]] && { stale=1; break; }
      done
      ((stale)) || exit 0
    fi
    "$CXX_BIN" "$@" -MMD -MF "$d" -c "$src" -o "$o"' "$out" "${flags[@]}"
}
export CXX_BIN=$cxx
objects() { for src in "$@"; do echo "$out/obj/$(echo "$src" | tr / _).o"; done; }

mapfile -t sources < <(find engine -name '*.cc' | sort)
echo "build_engine: ${#sources[@]} engine sources, LibTorch at ${LIBTORCH:-Debian}, ABI $abi," \
  "CUDA $([[ " ${defines[*]} " == *MULO_WITH_CUDA* ]] && echo on || echo off)"
compile "${sources[@]}"
mapfile -t engine_objects < <(objects "${sources[@]}")
rm -f "$out/libmulo_engine.a"
ar rcs "$out/libmulo_engine.a" "${engine_objects[@]}"
compile bench/ar_bench.cc
"$cxx" "${flags[@]}" $(objects bench/ar_bench.cc) "$out/libmulo_engine.a" "${libs[@]}" \
  -o "$out/ar_bench"
built=(ar_bench)

# The GPU test: GoogleTest from its sources (Debian and Ubuntu ship them) or a built library.
gtest_src=/usr/src/googletest/googletest
if [[ -f "$gtest_src/src/gtest-all.cc" ]]; then
  mkdir -p "$out/gtest"
  for part in gtest-all gtest_main; do
    [[ -f "$out/gtest/$part.o" ]] ||
      "$cxx" -std=c++17 -O2 -I"$gtest_src/include" -I"$gtest_src" \
        -D_GLIBCXX_USE_CXX11_ABI="$abi" -c "$gtest_src/src/$part.cc" -o "$out/gtest/$part.o"
  done
  gtest=("$out/gtest/gtest-all.o" "$out/gtest/gtest_main.o")
  gtest_include=(-isystem "$gtest_src/include")
elif [[ -f /usr/include/gtest/gtest.h ]] && ldconfig -p 2>/dev/null | grep -q libgtest_main; then
  gtest=(-lgtest_main -lgtest)
  gtest_include=()
else
  gtest=()
fi
# The optional programs do not stop the build when they fail: the engine and ar_bench stand.
if ((${#gtest[@]})); then
  flags_before=("${flags[@]}")
  flags+=("${gtest_include[@]}")
  if compile tests/gpu/gpu_engine_test.cc &&
     "$cxx" "${flags[@]}" $(objects tests/gpu/gpu_engine_test.cc) "$out/libmulo_engine.a" \
       "${gtest[@]}" "${libs[@]}" -o "$out/gpu_engine_test"; then
    built+=(gpu_engine_test)
  else
    echo "build_engine: gpu_engine_test FAILED to build" >&2
  fi
  flags=("${flags_before[@]}")
else
  echo "build_engine: no GoogleTest (sources or library): skipping gpu_engine_test"
fi

# methods_bench needs Abseil and OpenCV (SynthEval): the system's, or Debian's packages unpacked.
deps_libs=()
if [[ -d /usr/include/absl && -d /usr/include/opencv4 ]]; then
  flags+=(-isystem /usr/include/opencv4)
  deps_libs=(-lopencv_core -lopencv_imgproc)
  deps_libdir=/usr/lib/$(gcc -print-multiarch)
else
  debs=${DEPS_DEBS:-.gpu/debs}
  if compgen -G "$debs/*.deb" >/dev/null; then
    prefix=$PWD/$out/deps
    if [[ ! -d "$prefix/usr/include/absl" ]]; then
      for deb in "$debs"/*.deb; do dpkg-deb -x "$deb" "$prefix"; done
    fi
    deps_libdir=$prefix/usr/lib/x86_64-linux-gnu
    flags+=(-isystem "$prefix/usr/include" -isystem "$prefix/usr/include/opencv4")
    # DT_RPATH (not RUNPATH): OpenCV's own dependencies are found there too.
    deps_libs=(-L"$deps_libdir" -Wl,--disable-new-dtags -Wl,-rpath,"$deps_libdir" -Wl,-rpath-link,"$deps_libdir"
               -lopencv_core -lopencv_imgproc)
  fi
fi
if ((${#deps_libs[@]})); then
  absl=()
  for lib in "$deps_libdir"/libabsl_*.so; do absl+=("-l$(basename "${lib%.so}" | sed 's/^lib//')"); done
  mapfile -t synth_sources < <(find synth -name '*.cc' ! -name 'synth_eval_main.cc' | sort)
  if compile bench/methods_bench.cc "${synth_sources[@]}" &&
     "$cxx" "${flags[@]}" $(objects bench/methods_bench.cc "${synth_sources[@]}") \
       "$out/libmulo_engine.a" "${deps_libs[@]}" -Wl,--as-needed "${absl[@]}" "${libs[@]}" \
       -o "$out/methods_bench"; then
    built+=(methods_bench)
  else
    echo "build_engine: methods_bench FAILED to build" >&2
  fi
else
  echo "build_engine: no Abseil/OpenCV (system or DEPS_DEBS): skipping methods_bench"
fi
echo "build_engine: built $out/libmulo_engine.a and ${built[*]} in $out"
