#!/usr/bin/env bash
# Run here (Debian bookworm, which has the packages): gathers what the GPU machine lacks to
# build methods_bench, mulo_server and mulo_client beside the engine, into .gpu/ (git-ignored,
# carried to the machine by the device tool; about 31 MB):
#   .gpu/include  nlohmann/json headers;
#   .gpu/debs     Debian's Abseil, OpenCV (core, imgproc), gRPC, protobuf, libmicrohttpd, libpng
#                 and libjpeg packages with the runtime libraries they need beyond glibc (OpenSSL,
#                 GnuTLS...), which tools/build_engine.sh unpacks there;
#   .gpu/deps.tar.xz  the same packages unpacked, less their static libraries and documentation
#                 (18 MB against the packages' 30: the device tool carries at most 64 MiB with the
#                 40 MB tree); carry it instead of .gpu/debs and build_engine.sh unpacks it;
#   .gpu/gen      the wire contract's and server reflection's C++ code from Debian's protoc and gRPC plugin (the machine
#                 has neither; it must match the protobuf 3.21 carried).
# Idempotent.
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .gpu/include .gpu/debs
[[ -d .gpu/include/nlohmann ]] || cp -r /usr/include/nlohmann .gpu/include/
packages=(libabsl-dev libabsl20220623 libopencv-core-dev libopencv-core406 libopencv-imgproc-dev
          libopencv-imgproc406 libtbb12 libtbbmalloc2 libblas3 liblapack3 libgfortran5
          libquadmath0 libglx0 libglvnd0 libx11-6 libx11-data libxcb1 libxau6 libxdmcp6 libbsd0
          libmd0
          libgrpc++-dev libgrpc-dev libgrpc++1.51 libgrpc29 libprotobuf-dev libprotobuf32
          libre2-9 libc-ares2 libssl3 libmicrohttpd-dev libmicrohttpd12 libgnutls30 libnettle8
          libhogweed6 libgmp10 libp11-kit0 libidn2-0 libunistring2 libtasn1-6 libffi8
          libpng-dev libpng16-16 libjpeg62-turbo-dev libjpeg62-turbo)
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
# The slim archive, rebuilt when a package is newer.
if [[ ! -f .gpu/deps.tar.xz ]] || [[ -n $(find .gpu/debs -newer .gpu/deps.tar.xz -name '*.deb') ]]; then
  slim=$(mktemp -d)
  for deb in .gpu/debs/*.deb; do dpkg-deb -x "$deb" "$slim"; done
  find "$slim" -name '*.a' -delete
  rm -rf "$slim"/usr/share/{doc,man,locale,lintian,X11}
  tar cJf .gpu/deps.tar.xz -C "$slim" .
  rm -rf "$slim"
fi
echo "fetch_deps: .gpu/deps.tar.xz $(du -sh .gpu/deps.tar.xz | cut -f1)"
echo "fetch_deps: .gpu holds $(ls .gpu/debs | wc -l) packages, $(du -sh .gpu | cut -f1)"
