#!/usr/bin/env bash
# Run here (Debian bookworm, which has the packages): gathers what the GPU machine lacks to
# build methods_bench beside the engine, into .gpu/ (git-ignored, carried to the machine by the
# device tool): nlohmann/json headers, and Debian's Abseil and OpenCV (core, imgproc) packages
# with their runtime dependencies, which tools/build_engine.sh unpacks there. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .gpu/include .gpu/debs
[[ -d .gpu/include/nlohmann ]] || cp -r /usr/include/nlohmann .gpu/include/
packages=(libabsl-dev libabsl20220623 libopencv-core-dev libopencv-core406 libopencv-imgproc-dev
          libopencv-imgproc406 libtbb12 libtbbmalloc2 libblas3 liblapack3 libgfortran5
          libquadmath0 libglx0 libglvnd0 libx11-6 libx11-data libxcb1 libxau6 libxdmcp6 libbsd0
          libmd0)
missing=()
for p in "${packages[@]}"; do compgen -G ".gpu/debs/${p}_*.deb" >/dev/null || missing+=("$p"); done
if ((${#missing[@]})); then (cd .gpu/debs && apt-get download "${missing[@]}"); fi
echo "fetch_deps: .gpu holds $(ls .gpu/debs | wc -l) packages, $(du -sh .gpu | cut -f1)"
