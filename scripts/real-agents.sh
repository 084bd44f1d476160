#!/usr/bin/env bash
# Opt-in check against the real agent CLIs (not part of scripts/test.sh):
# installs Claude Code with npm into a temporary directory and runs
# internal/agents' TestRealClaude, which drives it in a private tmux server
# against internal/mockapi (a loopback mock of the Anthropic Messages API):
# trust and API-key dialogs, idle prompt, a turn, a hung API call (spinner),
# Esc, a permission prompt, a rate limit, the idle reminder, exit and resume,
# and headless stream-json runs (ok, tool, 429, 529 with retries).
#
#   scripts/real-agents.sh              # check
#   scripts/real-agents.sh --capture    # check and rewrite internal/agents/testdata/claude
#
# CLAUDE_CODE_VERSION picks the npm version (default: latest). Needs node,
# npm and tmux. Nothing is installed outside the temporary directory.
set -euo pipefail
cd "$(dirname "$0")/.."

capture=0
for a in "$@"; do
  case "$a" in
    --capture) capture=1 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "unknown argument: $a" >&2; exit 2 ;;
  esac
done

for tool in node npm tmux go; do
  command -v "$tool" >/dev/null 2>&1 || { echo "$tool is required" >&2; exit 1; }
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

version=${CLAUDE_CODE_VERSION:-latest}
echo "== npm install @anthropic-ai/claude-code@$version"
npm install --prefix "$tmp" --no-audit --no-fund --loglevel=error "@anthropic-ai/claude-code@$version" >/dev/null
claude="$tmp/node_modules/.bin/claude"
echo "claude: $("$claude" --version) ($(readlink -f "$claude"))"

echo "== TestRealClaude"
HERD_REAL_CLAUDE="$claude" HERD_CAPTURE_FIXTURES="$capture" \
  go test -count=1 -timeout 10m -run '^TestRealClaude$' -v ./internal/agents/
if [ "$capture" = 1 ]; then
  echo "== fixture tests on the new captures"
  go test -count=1 ./internal/agents/
fi
