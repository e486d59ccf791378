#!/usr/bin/env bash
# Installs the Debian packages Kiln needs, configures and builds it.
# Usage: scripts/build.sh [TARGET...]   (ninja targets; default: everything)
# BUILD_DIR (default build/) and CMAKE_BUILD_TYPE (default Release) can be set.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-deps.sh
BUILD_DIR=${BUILD_DIR:-build}
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/kiln-ccache}
# Paths relative to the checkout, so another clone hits the same cache.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
export CCACHE_NOHASHDIR=1
cmake -G Ninja -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE="${CMAKE_BUILD_TYPE:-Release}" \
  -DCMAKE_C_COMPILER=gcc -DCMAKE_CXX_COMPILER=g++ >/dev/null
ninja -C "$BUILD_DIR" -j"$(nproc)" "$@"
