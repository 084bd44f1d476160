#!/usr/bin/env bash
# The project's test command: formatting, vet, staticcheck, then every test
# with the race detector. Installs tmux first when it is missing (the tmux
# runtime's tests drive a real tmux server).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v tmux >/dev/null 2>&1; then
  echo "tmux is missing; installing it"
  if [ "$(id -u)" -eq 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tmux
  else
    sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tmux
  fi
fi

echo "== gofmt"
unformatted=$(gofmt -l $(find . -name '*.go' -not -path './.git/*'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

echo "== go vet"
go vet ./...

echo "== staticcheck"
go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

echo "== go test -race"
# One package at a time: the end-to-end and daemon packages each drive
# hundreds of real processes and tmux sessions; on a small machine running
# them side by side only measures the machine.
go test -race -count=1 -p 1 -timeout 20m ./...
