#!/usr/bin/env bash
# Builds the engine and the programs that need no server without Bazel, against any LibTorch:
# for GPU machines that have a PyTorch install (with CUDA) but no Bazel, gRPC or Debian's
# libraries (docs/design.md, "Build"; tools/gpu/run.sh calls it there).
#
#   tools/build_engine.sh [--kernels_only] [OUT_DIR]
#     --kernels_only               the dry run of the fused CUDA kernels (engine/kernels): nvcc
#                                  compiles fused_kernels.cu and g++ checks fused_ops.cc in its
#                                  CUDA form, against any LibTorch's headers; nothing is linked
#                                  and no GPU is needed (tests/kernels runs it in CI)
#     NVCC=/path/to/nvcc           default: nvcc on the PATH, else $CUDA_HOME/bin/nvcc
#     CUDA_ARCHS="80 90"           the SM architectures the kernels are built for (machine code
#                                  for each, PTX of the last); MULO_CUDA_KERNELS=0 leaves the
#                                  kernels out of a CUDA build (LibTorch's ops then)
#     LIBTORCH=/path/to/libtorch   directory with include/ and lib/ (default: the torch package
#                                  of `python3`, else Debian's libtorch-dev)
#     NLOHMANN_INCLUDE=/path       directory holding nlohmann/json.hpp (default /usr/include,
#                                  else .gpu/include from tools/gpu/fetch_deps.sh)
#     DEPS=auto|system|debs        where Abseil, OpenCV, gRPC... come from (see below)
#     DEPS_DEBS=/path              Debian packages to unpack when the system lacks them
#                                  (default .gpu/debs, tools/gpu/fetch_deps.sh)
#     CXX=g++  JOBS=$(nproc)  CXXSTD=c++17
# Always builds OUT_DIR/libmulo_engine.a, OUT_DIR/ar_bench and OUT_DIR/token_model_bench
# (default OUT_DIR: out/engine);
# with GoogleTest also OUT_DIR/gpu_engine_test; with Abseil and OpenCV also OUT_DIR/methods_bench;
# with gRPC, protobuf, libmicrohttpd, libpng and libjpeg also OUT_DIR/mulo_server and mulo_client.
# With a CUDA LibTorch, MULO_WITH_CUDA is defined (CUDA graphs). Objects are rebuilt only when
# a source or a header it includes changed.
set -euo pipefail
cd "$(dirname "$0")/.."
kernels_only=0
if [[ ${1:-} == --kernels_only ]]; then
  kernels_only=1
  shift
fi
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

# The fused decode kernels (engine/kernels, issue 63): CUDA C++ that nvcc compiles into one
# object of the engine; fused_ops.cc then calls them (MULO_WITH_CUDA_KERNELS).
nvcc=${NVCC:-$(command -v nvcc || echo "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc")}
nvcc_flags=(-std=c++17 -O3 -I. -Xcompiler -fPIC)
for arch in ${CUDA_ARCHS:-80 90}; do nvcc_flags+=(-gencode "arch=compute_$arch,code=sm_$arch"); done
nvcc_flags+=(-gencode "arch=compute_${arch},code=compute_${arch}")
kernel_object=$out/obj/engine_kernels_fused_kernels.cu.o
# compile_kernels: the object, rebuilt when the kernels or their header changed.
compile_kernels() {
  mkdir -p "$out/obj"
  [[ -x "$nvcc" ]] || { echo "build_engine: no nvcc (set NVCC or CUDA_HOME)" >&2; return 1; }
  if [[ -f "$kernel_object" && "$kernel_object" -nt engine/kernels/fused_kernels.cu &&
        "$kernel_object" -nt engine/kernels/fused_kernels.h ]]; then
    return 0
  fi
  rm -f "$kernel_object"
  "$nvcc" "${nvcc_flags[@]}" -c engine/kernels/fused_kernels.cu -o "$kernel_object" ||
    { echo "build_engine: FAILED engine/kernels/fused_kernels.cu" >&2; return 1; }
}
if ((kernels_only)); then
  compile_kernels
  # fused_ops.cc as a CUDA build compiles it. A CPU LibTorch (Debian's) ships ATen's CUDA
  # headers but not the one its CMake generates; an empty one stands in for this check only.
  check_includes=("${includes[@]}")
  torch_include=${LIBTORCH:+$LIBTORCH/include}
  if [[ ! -f "${torch_include:-/usr/include}/c10/cuda/impl/cuda_cmake_macros.h" ]]; then
    mkdir -p "$out/stub/c10/cuda/impl"
    echo '#pragma once' > "$out/stub/c10/cuda/impl/cuda_cmake_macros.h"
    check_includes+=(-isystem "$out/stub")
  fi
  # The toolkit's headers: beside nvcc, unless nvcc is a wrapper elsewhere (/usr/local/bin).
  for cuda_home in "${CUDA_HOME:-}" "$(dirname "$(dirname "$(readlink -f "$nvcc")")")" \
      /usr/local/cuda; do
    [[ -f "$cuda_home/include/cuda_runtime_api.h" ]] && break
  done
  "$cxx" -std="${CXXSTD:-c++17}" -fsyntax-only -I. "${check_includes[@]}" \
    -isystem "$cuda_home/include" "${defines[@]}" -DMULO_WITH_CUDA=1 -DMULO_WITH_CUDA_KERNELS=1 \
    engine/kernels/fused_ops.cc ||
    { echo "build_engine: FAILED engine/kernels/fused_ops.cc (CUDA form)" >&2; exit 1; }
  echo "build_engine: kernels compiled by $("$nvcc" --version | tail -1) for ${CUDA_ARCHS:-80 90}" \
    "($kernel_object); fused_ops.cc checked in its CUDA form"
  exit 0
fi
kernel_objects=()
if [[ " ${defines[*]} " == *MULO_WITH_CUDA=1* && ${MULO_CUDA_KERNELS:-1} != 0 ]]; then
  if compile_kernels; then
    kernel_objects=("$kernel_object")
    defines+=(-DMULO_WITH_CUDA_KERNELS=1)
  else
    echo "build_engine: the fused kernels are left out (LibTorch's ops run instead)" >&2
  fi
fi

mkdir -p "$out/obj"
flags=(-std="${CXXSTD:-c++17}" -O2 -fPIC -I. "${includes[@]}" "${defines[@]}")

# Everything is decided first and compiled in one pool of JOBS: on a GPU machine the build is
# the long pole of a run measured in minutes, and separate pools per program wait for each
# one's slowest file. The include paths are the union of all programs' (each is harmless to
# the others).

# GoogleTest, for the GPU test: from its sources (Debian and Ubuntu ship them) or a library.
gtest_src=/usr/src/googletest/googletest
gtest_sources=()
if [[ -f "$gtest_src/src/gtest-all.cc" ]]; then
  gtest_sources=("$gtest_src/src/gtest-all.cc" "$gtest_src/src/gtest_main.cc")
  flags+=(-isystem "$gtest_src/include" -I"$gtest_src")
  gtest=()
elif [[ -f /usr/include/gtest/gtest.h ]] && ldconfig -p 2>/dev/null | grep -q libgtest_main; then
  gtest=(-lgtest_main -lgtest)
else
  gtest=(none)
  echo "build_engine: no GoogleTest (sources or library): skipping gpu_engine_test"
fi

# The programs beyond the engine need Debian's libraries: methods_bench Abseil and OpenCV (core,
# imgproc: SynthEval); mulo_server and mulo_client gRPC, protobuf, libmicrohttpd, libpng and
# libjpeg besides. DEPS=system takes the system's, DEPS=debs unpacks the packages in DEPS_DEBS
# under OUT_DIR/deps and links them by DT_RPATH (not RUNPATH, so that their own dependencies are
# found there too); DEPS=auto (the default) takes the system's when it has every header.
deps=${DEPS:-auto}
debs=${DEPS_DEBS:-.gpu/debs}
# The same packages unpacked and slimmed (tools/gpu/fetch_deps.sh: the engine's programs' and
# the server's), used when the packages are not there (the device tool carries an archive at a
# time: the packages would not fit beside the tree); each one found is unpacked once.
deps_archives=()
for archive in ${DEPS_ARCHIVES:-.gpu/deps.tar.xz .gpu/deps_server.tar.xz}; do
  [[ -f $archive ]] && deps_archives+=("$archive")
done
deps_root=/usr
has_headers() { for header in "$@"; do [[ -e "$deps_root/include/$header" ]] || return 1; done; }
if [[ $deps == auto ]]; then
  deps=system
  has_headers absl opencv4 grpcpp google/protobuf microhttpd.h png.h jpeglib.h || deps=debs
  compgen -G "$debs/*.deb" >/dev/null || ((${#deps_archives[@]})) || deps=system
fi
if [[ $deps == debs ]]; then
  prefix=$out/deps
  [[ $prefix == /* ]] || prefix=$PWD/$prefix
  mkdir -p "$prefix/.unpacked"
  if compgen -G "$debs/*.deb" >/dev/null; then
    for deb in "$debs"/*.deb; do  # each package once, so that added packages are unpacked too
      stamp=$prefix/.unpacked/$(basename "$deb")
      [[ -f "$stamp" ]] || { dpkg-deb -x "$deb" "$prefix" && touch "$stamp"; }
    done
  else
    for archive in "${deps_archives[@]}"; do
      stamp=$prefix/.unpacked/$(basename "$archive")
      [[ $stamp -nt $archive ]] || { tar xJf "$archive" -C "$prefix" && touch "$stamp"; }
    done
  fi
  deps_root=$prefix/usr
  deps_libdir=$deps_root/lib/x86_64-linux-gnu
  flags+=(-isystem "$deps_root/include" -isystem "$deps_root/include/opencv4")
  deps_link=(-L"$deps_libdir" -Wl,--disable-new-dtags "-Wl,-rpath,$deps_libdir"
             "-Wl,-rpath-link,$deps_libdir")
else
  deps_libdir=/usr/lib/$(gcc -print-multiarch)
  flags+=(-isystem /usr/include/opencv4)
  deps_link=()
fi
absl=()
for lib in "$deps_libdir"/libabsl_*.so; do
  [[ -e "$lib" ]] && absl+=("-l$(basename "${lib%.so}" | sed 's/^lib//')")
done

bench_sources=()
if has_headers absl opencv4/opencv2/imgproc.hpp; then
  mapfile -t synth_sources < <(find synth -name '*.cc' ! -name 'synth_eval_main.cc' | sort)
  bench_sources=(bench/methods_bench.cc "${synth_sources[@]}")
else
  echo "build_engine: no Abseil/OpenCV ($deps): skipping methods_bench"
fi

# The wire contract's C++ code: generated here when protoc and the gRPC plugin are installed,
# else taken from .gpu/gen (tools/gpu/fetch_deps.sh generates it with Debian's protoc, whose
# protobuf 3.21 is the one DEPS_DEBS carries).
protos=(mulo/v1/image_generation grpc/reflection/v1/reflection)
gen=$out/gen
if command -v protoc >/dev/null && command -v grpc_cpp_plugin >/dev/null; then
  mkdir -p "$gen"
  for proto in "${protos[@]}"; do
    [[ "$gen/$proto.pb.cc" -nt "proto/$proto.proto" ]] ||
      protoc --proto_path=proto --cpp_out="$gen" --grpc_out="$gen" \
        --plugin=protoc-gen-grpc="$(command -v grpc_cpp_plugin)" "proto/$proto.proto"
  done
elif [[ -f .gpu/gen/${protos[0]}.pb.cc ]]; then
  gen=.gpu/gen
fi
proto_sources=() server_sources=() client_sources=()
if has_headers absl grpcpp google/protobuf microhttpd.h png.h jpeglib.h webp/encode.h \
     unicode/regex.h &&
   [[ -f "$gen/${protos[0]}.pb.cc" && -f "$gen/${protos[1]}.pb.cc" ]]; then
  # A PyTorch wheel's include/ holds protobuf 3.13 headers of its own; the generated code needs
  # the headers of the protobuf it links (3.21), so they come first, through a directory of
  # their own (adding /usr/include itself to the path would break #include_next).
  mkdir -p "$out/include_first"
  ln -sfn "$deps_root/include/google" "$out/include_first/google"
  flags=(-isystem "$out/include_first" "${flags[@]}" -I"$gen" -Iproto)
  proto_sources=()
  for proto in "${protos[@]}"; do proto_sources+=("$gen/$proto.pb.cc" "$gen/$proto.grpc.pb.cc"); done
  # The text front ends the server tokenises prompts with (ICU), less the tokenize tool and the
  # sentencepiece plugin (a shared object of its own, below).
  mapfile -t server_sources < <(find server text -name '*.cc' ! -name tokenize_main.cc \
                                  ! -name sentencepiece_plugin.cc | sort)
  mapfile -t client_sources < <(find client -name '*.cc' | sort)
else
  echo "build_engine: no gRPC, protobuf, libmicrohttpd, libpng, libjpeg, libwebp, ICU or generated proto" \
    "code ($deps): skipping mulo_server and mulo_client"
fi

# compile SRC...: objects under $out/obj, rebuilt when the source or an included file changed.
# A failed compile leaves no object (a stale one is removed first), so each program below links
# only when all of its objects were built; the others still build.
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
    rm -f "$o"
    "$CXX_BIN" "$@" -MMD -MF "$d" -c "$src" -o "$o" || { echo "build_engine: FAILED $src" >&2; exit 1; }' \
    "$out" "${flags[@]}"
}
export CXX_BIN=$cxx
objects() { for src in "$@"; do echo "$out/obj/$(echo "$src" | tr / _).o"; done; }
all_built() { for o in $(objects "$@"); do [[ -f "$o" ]] || return 1; done; }

mapfile -t sources < <(find engine -name '*.cc' | sort)
echo "build_engine: ${#sources[@]} engine sources, LibTorch at ${LIBTORCH:-Debian}, ABI $abi," \
  "CUDA $([[ " ${defines[*]} " == *MULO_WITH_CUDA=1* ]] && echo on || echo off)," \
  "fused kernels $( ((${#kernel_objects[@]})) && echo on || echo off), $jobs jobs"
programs=(bench/ar_bench.cc bench/token_model_bench.cc)
gpu_tests=(tests/gpu/gpu_engine_test.cc tests/gpu/fused_kernels_gpu_test.cc)
[[ ${gtest[*]} == none ]] || programs+=("${gtest_sources[@]}" "${gpu_tests[@]}")
programs+=("${bench_sources[@]}" "${proto_sources[@]}" "${server_sources[@]}"
           "${client_sources[@]}")
# The largest files first, so that the pool does not end waiting on one of them.
mapfile -t pool < <(for src in "${sources[@]}" "${programs[@]}"; do
  echo "$(stat -c %s "$src") $src"; done | sort -rn | cut -d' ' -f2)
compile "${pool[@]}" || true
all_built "${sources[@]}" || { echo "build_engine: the engine FAILED to compile" >&2; exit 1; }
mapfile -t engine_objects < <(objects "${sources[@]}")
rm -f "$out/libmulo_engine.a"
ar rcs "$out/libmulo_engine.a" "${engine_objects[@]}" "${kernel_objects[@]}"

# link OUTPUT SRC... -- LIB...: the program when all its objects were built, else a message;
# the engine and the other programs stand.
built=()
link() {
  local output=$1 srcs=()
  shift
  while [[ $1 != -- ]]; do srcs+=("$1"); shift; done
  shift
  rm -f "$out/$output"
  if all_built "${srcs[@]}" &&
     "$cxx" "${flags[@]}" $(objects "${srcs[@]}") "$out/libmulo_engine.a" "${deps_link[@]}" \
       -Wl,--as-needed "$@" "${absl[@]}" "${libs[@]}" -o "$out/$output"; then
    built+=("$output")
  else
    echo "build_engine: $output FAILED to build" >&2
  fi
}

link ar_bench bench/ar_bench.cc -- &
link token_model_bench bench/token_model_bench.cc -- &
[[ ${gtest[*]} == none ]] ||
  link gpu_engine_test "${gpu_tests[@]}" "${gtest_sources[@]}" -- "${gtest[@]}" &
((${#bench_sources[@]} == 0)) ||
  link methods_bench "${bench_sources[@]}" -- -lopencv_core -lopencv_imgproc &
if ((${#server_sources[@]})); then
  grpc_libs=(-lgrpc++_reflection -lgrpc++ -lgrpc -lgpr -lprotobuf)
  link mulo_server "${proto_sources[@]}" "${server_sources[@]}" -- "${grpc_libs[@]}" \
    -lmicrohttpd -lpng16 -ljpeg -lwebp -licui18n -licuuc -ldl &
  # LlamaGen t2i's T5 tokenizer: libsentencepiece behind a plugin the server dlopens from its
  # own directory (text/sentencepiece_plugin.cc says why).
  if has_headers sentencepiece_processor.h; then
    "$cxx" "${flags[@]}" -shared -fPIC text/sentencepiece_plugin.cc -o "$out/libmulo_sentencepiece.so" \
      "${deps_link[@]}" -lsentencepiece ||
      echo "build_engine: FAILED libmulo_sentencepiece.so (T5 prompts unavailable)" >&2 &
  fi
  link mulo_client "${proto_sources[@]}" "${client_sources[@]}" -- "${grpc_libs[@]}" &
fi
wait
built=()
for program in ar_bench token_model_bench gpu_engine_test methods_bench mulo_server mulo_client; do
  [[ -x "$out/$program" ]] && built+=("$program")
done
echo "build_engine: built $out/libmulo_engine.a and ${built[*]} in $out"
