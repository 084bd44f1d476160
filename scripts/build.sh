#!/usr/bin/env bash
# Builds herd as one static binary (CGO_ENABLED=0: no libc, runs on any
# Linux of the same architecture). Usage: scripts/build.sh [OUTPUT]
# (default ./herd). GOOS/GOARCH pass through for cross builds.
#
# `herd version` reads the module version and the git revision from the
# build info. Go stamps them itself in a plain checkout; where it cannot
# (a git worktree, GOFLAGS=-buildvcs=false) they are passed to the linker.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-herd}

ldflags="-s -w"
if rev=$(git rev-parse HEAD 2>/dev/null); then
  dirty=false
  if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
    dirty=true
  fi
  ldflags+=" -X main.commit=$rev -X main.dirty=$dirty"
  if tag=$(git describe --tags --exact-match 2>/dev/null); then
    ldflags+=" -X main.version=$tag"
  fi
fi

CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$out" ./cmd/herd
case $out in */*) run=$out ;; *) run=./$out ;; esac
echo "built $out: $("$run" version)"
