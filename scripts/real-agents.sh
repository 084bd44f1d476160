#!/usr/bin/env bash
# Opt-in check against the real agent CLIs (not part of scripts/test.sh):
# installs Claude Code, Codex and Gemini CLI with npm into a temporary
# directory and runs internal/agents' real tests against internal/mockapi (a
# loopback mock of the Anthropic Messages API, the OpenAI Responses API and
# the Gemini API).
#
# TestRealClaude drives Claude Code in a private tmux server: trust and
# API-key dialogs, idle prompt, a turn, a hung API call (spinner), Esc, a
# permission prompt, a rate limit, the idle reminder, exit and resume, and
# headless stream-json runs (ok, tool, 429, 529 with retries).
# TestRealCodex runs `codex exec --json`: ok, tool, usage limit, 503 with
# reconnects; TestRealCodexTUI drives the interactive Codex in tmux with
# herd's hooks and notify: trust, hooks review, a turn, a hung request, Esc,
# an approval, quit and resume. TestRealGemini runs `gemini -p -o
# stream-json` with herd's hooks: ok, a shell tool, a daily quota;
# TestRealGeminiTUI drives the interactive Gemini CLI in tmux: trust, a turn,
# a hung request, Esc, a permission dialog, quit and resume.
# TestRealClaudeUnderHerd (e2e) runs Claude Code under the herd daemon with
# a [notify] webhook: the latency from the permission dialog on screen to
# the notification delivered (goal: under 2 s), and a SIGSEGV crash
# relaunch continuing the conversation (the mock sees the earlier
# messages).
#
#   scripts/real-agents.sh              # check
#   scripts/real-agents.sh --capture    # check and rewrite the fixtures of these versions
#
# CLAUDE_CODE_VERSION, CODEX_VERSION and GEMINI_CLI_VERSION pick the npm
# versions (default: latest); SKIP_CODEX=1 and SKIP_GEMINI=1 skip those.
# Needs node, npm, tmux and go. Nothing is installed outside the temporary
# directory.
set -euo pipefail
cd "$(dirname "$0")/.."

capture=0
for a in "$@"; do
  case "$a" in
    --capture) capture=1 ;;
    -h|--help) sed -n '2,31p' "$0"; exit 0 ;;
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

codex=""
if [ "${SKIP_CODEX:-0}" != 1 ]; then
  cversion=${CODEX_VERSION:-latest}
  echo "== npm install @openai/codex@$cversion"
  npm install --prefix "$tmp" --no-audit --no-fund --loglevel=error "@openai/codex@$cversion" >/dev/null
  codex="$tmp/node_modules/.bin/codex"
  echo "codex: $("$codex" --version)"
fi

gemini=""
if [ "${SKIP_GEMINI:-0}" != 1 ]; then
  gversion=${GEMINI_CLI_VERSION:-latest}
  echo "== npm install @google/gemini-cli@$gversion"
  npm install --prefix "$tmp" --no-audit --no-fund --loglevel=error "@google/gemini-cli@$gversion" >/dev/null
  gemini="$tmp/node_modules/.bin/gemini"
  echo "gemini: $("$gemini" --version)"
fi

echo "== TestRealClaude, TestRealCodex(TUI), TestRealGemini(TUI)"
HERD_REAL_CLAUDE="$claude" HERD_REAL_CODEX="$codex" HERD_REAL_GEMINI="$gemini" HERD_CAPTURE_FIXTURES="$capture" \
  go test -count=1 -timeout 15m -run '^TestReal(Claude|Codex|CodexTUI|Gemini|GeminiTUI)$' -v ./internal/agents/
echo "== TestRealClaudeUnderHerd"
HERD_REAL_CLAUDE="$claude" go test -count=1 -timeout 10m -run '^TestRealClaudeUnderHerd$' -v ./e2e/
if [ "$capture" = 1 ]; then
  echo "== fixture tests on the new captures"
  go test -count=1 ./internal/agents/
fi
