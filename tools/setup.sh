#!/usr/bin/env bash
# Installs every Debian package mulo needs to build, test, serve and train (docs/design.md, "Build").
# Idempotent and non-interactive: when everything is present it changes nothing and returns in
# seconds. Works as root (no sudo needed) or as a user with sudo.
set -euo pipefail

PACKAGES=(
  # build
  bazel-bootstrap clang-14 g++ pkg-config
  # engine: LibTorch (CPU) and its fast BLAS (without it matmuls are ~8x slower)
  libtorch-dev libopenblas0-pthread
  # server, client, metrics
  libgrpc++-dev protobuf-compiler-grpc protobuf-compiler libprotobuf-dev libabsl-dev
  libmicrohttpd-dev nlohmann-json3-dev libpng-dev libjpeg62-turbo-dev libwebp-dev
  # text front ends (text/): Unicode classes and NFC for the BPE tokenizers; T5's sentencepiece
  # (and its command-line tools, the tests' reference)
  libicu-dev libsentencepiece-dev sentencepiece
  # SynthEval, benchmarks and tests (the server encodes with libpng / libjpeg only)
  libopencv-core-dev libopencv-imgproc-dev libopencv-imgcodecs-dev
  # tests
  libgtest-dev libgmock-dev prometheus openssl curl nginx-light libfuzzer-14-dev chromium
  # tools (reference models, training, plots) use Debian's interpreter: /usr/bin/python3
  python3-torch python3-numpy python3-matplotlib python3-yaml
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  # dpkg-query prints "install ok installed" only for fully installed packages.
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$pkg")
done
# The deploy test renders the kustomizations with kubectl: Debian's kubernetes-client, unless
# a kubectl is already installed (another package's would conflict with it).
command -v kubectl >/dev/null || missing+=(kubernetes-client)

# The tests' real peers from npm (tests/peers/package-lock.json): the official openai SDK.
# `npm ci` installs exactly the lockfile; it runs again only when the lockfile changed.
install_peers() {
  local peers=tests/peers
  [[ -f "$peers/package-lock.json" ]] || return 0
  if [[ -f "$peers/node_modules/.package-lock.json" &&
        ! "$peers/package-lock.json" -nt "$peers/node_modules/.package-lock.json" ]]; then
    return 0
  fi
  if ! command -v npm >/dev/null; then
    # Debian's Node (18) runs the pinned SDK; a newer Node already installed is used as is.
    echo "setup: installing nodejs and npm for the tests' npm peers"
    local sudo=()
    [[ $(id -u) -eq 0 ]] || sudo=(sudo -n)
    if ! "${sudo[@]}" apt-get install -y -q --no-install-recommends nodejs npm \
        >/tmp/mulo-apt-node.log 2>&1; then
      echo "setup: could not install nodejs and npm (see /tmp/mulo-apt-node.log)" >&2
      return 1
    fi
  fi
  echo "setup: installing the tests' npm peers (tests/peers)"
  if ! (cd "$peers" && npm ci --no-audit --no-fund --loglevel=error >/tmp/mulo-npm.log 2>&1); then
    echo "setup: npm ci failed; the last lines of /tmp/mulo-npm.log:" >&2
    tail -n 20 /tmp/mulo-npm.log >&2
    return 1
  fi
}
cd "$(dirname "$0")/.."

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#PACKAGES[@]} packages are installed"
  install_peers
  exit $?
fi

if [[ $(id -u) -eq 0 ]]; then
  SUDO=()
elif command -v sudo >/dev/null; then
  SUDO=(sudo -n)
else
  echo "setup: missing packages (${missing[*]}) and not root, and no sudo to install them" >&2
  exit 1
fi

echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
if ! "${SUDO[@]}" apt-get update -q >/tmp/mulo-apt-update.log 2>&1; then
  echo "setup: apt-get update failed (see /tmp/mulo-apt-update.log)" >&2
  exit 1
fi
if ! "${SUDO[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" \
    >/tmp/mulo-apt-install.log 2>&1; then
  echo "setup: apt-get install failed; the last lines of /tmp/mulo-apt-install.log:" >&2
  tail -n 20 /tmp/mulo-apt-install.log >&2
  for pkg in "${missing[@]}"; do
    if ! apt-cache show "$pkg" >/dev/null 2>&1; then
      echo "setup: package '$pkg' is not available from the configured Debian sources" >&2
    fi
  done
  exit 1
fi

# Verify: a package that apt reported as installed but is not would break the build later.
for pkg in "${missing[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  if [[ "$status" != "install ok installed" ]]; then
    echo "setup: package '$pkg' could not be installed" >&2
    exit 1
  fi
done
install_peers || exit 1
echo "setup: done"
