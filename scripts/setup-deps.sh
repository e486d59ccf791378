#!/usr/bin/env bash
# Installs the exact Debian 12 packages Kiln needs. Idempotent and non-interactive.
set -euo pipefail
PKGS=(
  cmake ninja-build ccache g++ git pkg-config
  llvm-22 llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools clang-22 lld-22 libclang-rt-22-dev
  clang-format-22
  flatbuffers-compiler libflatbuffers-dev
  libpcre2-dev nlohmann-json3-dev libcpp-httplib-dev libboost-dev
  libgtest-dev libgmock-dev
  openmpi-bin libopenmpi-dev
  python3 python3-numpy python3-jinja2
)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup-deps: all ${#PKGS[@]} packages present"
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
echo "setup-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
