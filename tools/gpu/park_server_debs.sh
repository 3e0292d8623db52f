#!/usr/bin/env bash
# The device tool carries at most 64 MiB (the working tree plus .gpu/). The Debian packages only
# mulo_server and mulo_client need (gRPC, protobuf, libmicrohttpd and their TLS libraries, about
# 14 MB) can be parked outside the tree for a run that builds the engine, the tests and the
# benches alone (build_engine.sh then skips the server and the client and says so).
#
#   tools/gpu/park_server_debs.sh park      # .gpu/debs/<server packages> -> .gpu_parked/
#   tools/gpu/park_server_debs.sh restore   # and back
set -euo pipefail
cd "$(dirname "$0")/../.."
parked=${PARKED:-../.gpu_parked_$(basename "$PWD")}
patterns=(libgrpc libprotobuf libssl3 libgnutls30 libmicrohttpd)
case ${1:-} in
  park)
    mkdir -p "$parked"
    for p in "${patterns[@]}"; do
      for deb in .gpu/debs/"$p"*.deb; do [[ -e $deb ]] && mv "$deb" "$parked/"; done
    done
    ;;
  restore)
    [[ -d $parked ]] && for deb in "$parked"/*.deb; do [[ -e $deb ]] && mv "$deb" .gpu/debs/; done
    ;;
  *) echo "usage: $0 park|restore" >&2; exit 2 ;;
esac
echo "$(ls .gpu/debs | wc -l) packages in .gpu/debs ($(du -sh .gpu | cut -f1) carried)"
