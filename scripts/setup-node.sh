#!/usr/bin/env bash
# Installs the official `openai` npm package (the real client kiln-serve's
# tests use) into build/node/ (or $KILN_NODE_DIR). Idempotent; npm only.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${KILN_NODE_DIR:-${BUILD_DIR:-build}/node}
VERSION=4.104.0
if [ -f "$DIR/node_modules/openai/package.json" ] &&
   grep -q "\"version\": \"$VERSION\"" "$DIR/node_modules/openai/package.json"; then
  echo "setup-node: openai $VERSION present"
  exit 0
fi
mkdir -p "$DIR"
echo "setup-node: installing openai@$VERSION into $DIR"
npm install --prefix "$DIR" --no-audit --no-fund --no-save "openai@$VERSION" >/dev/null
