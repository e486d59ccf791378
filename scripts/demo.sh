#!/usr/bin/env bash
# The main job: set up, build, and run Kiln on the bundled GLM-5.2-architecture
# fixture. Grows with the pipeline.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
BUILD_DIR=${BUILD_DIR:-build}
FIXTURE=test/fixtures/glm5-tiny-dev
echo "== kiln-opt: the kiln dialect and passes =="
"$BUILD_DIR/bin/kiln-opt" --help | grep -E "Available Dialects"
