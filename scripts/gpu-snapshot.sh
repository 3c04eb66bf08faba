#!/usr/bin/env bash
# Packs the committed tree (HEAD) into .device/head.tar, which the GPU machine gets with
# carry [".device"]: `KFORGE_GPU_SNAPSHOT=1 scripts/gpu-test.sh` there unpacks it over the copy of
# the working tree first, so uncommitted edits here (a helper's work in progress) do not reach the
# GPU build. The device's copy of .git is not this one: `git stash` there would bring back old code.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .device
git archive --format=tar HEAD > .device/head.tar
echo "gpu-snapshot: $(git log --oneline -1 | cut -c1-80) -> .device/head.tar"
