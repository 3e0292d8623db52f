#!/usr/bin/env bash
# Run here (Debian bookworm, which has the packages): gathers what the GPU machine lacks to
# build methods_bench, mulo_server and mulo_client beside the engine, into .gpu/ (git-ignored,
# carried to the machine by the device tool; about 31 MB):
#   .gpu/include  nlohmann/json headers;
#   .gpu/debs     Debian's packages the programs beyond the engine need, with the runtime
#                 libraries they need beyond glibc;
#   .gpu/deps.tar.xz  the packages of the engine's programs (Abseil, OpenCV core and imgproc,
#                 libpng, libjpeg, libwebp: ar_bench, methods_bench, gpu_engine_test) unpacked,
#                 less their static libraries and documentation (about 9 MB);
#   .gpu/deps_server.tar.xz  the same for mulo_server and mulo_client beside them (gRPC,
#                 protobuf, libmicrohttpd, ICU for the text front ends, sentencepiece, and
#                 their TLS libraries: about 21 MB);
#                 the device tool carries at most 64 MiB with the 40 MB tree, so a lease's first
#                 call carries deps.tar.xz and builds the engine's programs, and a call on the
#                 same warm machine carries deps_server.tar.xz and builds the server too
#                 (tools/build_engine.sh unpacks each archive it finds, once);
#   .gpu/gen      the wire contract's and server reflection's C++ code from Debian's protoc and gRPC plugin (the machine
#                 has neither; it must match the protobuf 3.21 carried).
# Idempotent.
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .gpu/include .gpu/debs
[[ -d .gpu/include/nlohmann ]] || cp -r /usr/include/nlohmann .gpu/include/
engine_packages=(libabsl-dev libabsl20220623 libopencv-core-dev libopencv-core406
                 libopencv-imgproc-dev libopencv-imgproc406 libtbb12 libtbbmalloc2 libblas3
                 liblapack3 libgfortran5 libquadmath0 libglx0 libglvnd0 libx11-6 libx11-data
                 libxcb1 libxau6 libxdmcp6 libbsd0 libmd0 libpng-dev libpng16-16
                 libjpeg62-turbo-dev libjpeg62-turbo libwebp-dev libwebp7 libwebpmux3
                 libwebpdemux2)
server_packages=(libgrpc++-dev libgrpc-dev libgrpc++1.51 libgrpc29 libprotobuf-dev libprotobuf32
                 libre2-9 libc-ares2 libssl3 libmicrohttpd-dev libmicrohttpd12 libgnutls30
                 libnettle8 libhogweed6 libgmp10 libp11-kit0 libidn2-0 libunistring2 libtasn1-6
                 libffi8 libicu-dev libicu72 libsentencepiece-dev libsentencepiece0)
packages=("${engine_packages[@]}" "${server_packages[@]}")
missing=()
for p in "${packages[@]}"; do compgen -G ".gpu/debs/${p}_*.deb" >/dev/null || missing+=("$p"); done
if ((${#missing[@]})); then (cd .gpu/debs && apt-get download "${missing[@]}"); fi
# The wire contract and server reflection v1 (answered by mulo_server itself).
for proto in mulo/v1/image_generation grpc/reflection/v1/reflection; do
  if [[ ! .gpu/gen/$proto.pb.cc -nt proto/$proto.proto ]]; then
    mkdir -p .gpu/gen
    protoc --proto_path=proto --cpp_out=.gpu/gen --grpc_out=.gpu/gen \
      --plugin=protoc-gen-grpc="$(command -v grpc_cpp_plugin)" "proto/$proto.proto"
  fi
done
# slim ARCHIVE PACKAGE...: the packages unpacked, less static libraries, documentation and
# programs, as one archive; rebuilt when one of its packages is newer.
slim() {
  local archive=$1 p debs=()
  shift
  for p in "$@"; do debs+=(.gpu/debs/"${p}"_*.deb); done
  if [[ -f $archive ]] && [[ -z $(find "${debs[@]}" -newer "$archive") ]]; then return 0; fi
  local tree
  tree=$(mktemp -d)
  for deb in "${debs[@]}"; do dpkg-deb -x "$deb" "$tree"; done
  find "$tree" -name '*.a' -delete
  rm -rf "$tree"/usr/share/{doc,man,locale,lintian,X11} "$tree"/usr/bin "$tree"/usr/sbin \
    "$tree"/usr/lib/x86_64-linux-gnu/icu
  tar cJf "$archive" -C "$tree" .
  rm -rf "$tree"
}
slim .gpu/deps.tar.xz "${engine_packages[@]}"
slim .gpu/deps_server.tar.xz "${server_packages[@]}"
echo "fetch_deps: .gpu/deps.tar.xz $(du -sh .gpu/deps.tar.xz | cut -f1)," \
  ".gpu/deps_server.tar.xz $(du -sh .gpu/deps_server.tar.xz | cut -f1)"
echo "fetch_deps: .gpu holds $(ls .gpu/debs | wc -l) packages, $(du -sh .gpu | cut -f1)"
