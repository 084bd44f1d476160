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
# messages). TestRealClaudeDaemon (e2e) runs it with stall_after = 20s: the
# trust dialog is waiting (startup_prompt); idle at the prompt stays idle
# for 3 x stall_after; Esc mid-turn ends idle, never stalled; inject empties
# the input line Esc left the prompt in; a hung API call is stalled within
# stall_after and a tick; .../claude and the claude.exe it links to are both
# the claude agent and resume with --resume. TestRealGeminiTurns and
# TestRealCodexTurns (e2e) run Gemini CLI and Codex under the daemon with
# stall_after = 20s: idle at the prompt for 3 x stall_after, never stalled;
# five turns submitted by `herd inject`, each prompt reaching the mock; a
# hung API call stalled within stall_after and a tick, never read as idle.
# TestRealGeminiResumeRefused (e2e): Gemini CLI's chats lost and the agent
# killed, its `gemini -r <id>` refused (exit 42) is a resumed event with
# reason resume_failed and the next launch is the role's command.
#
# TestRealLauncherTrees reads the process tree of each agent started as
# npm installs it (node shims) and checks the agent picked is the real
# process: Claude's native binary, Codex's native TUI, Gemini CLI's child;
# --capture rewrites testdata/trees. TestRealLauncherAgents (e2e) runs Codex
# and Gemini CLI under the daemon: the recorded agent is the real process,
# SIGSEGV and SIGKILL of it are crashed with that signal and relaunched
# resuming the conversation (the mock sees the history), and herd signal
# TERM ends it.
#
# TestRealZeroSetupClaude, TestRealZeroSetupCodex and TestRealZeroSetupGemini
# (e2e) run each agent under the daemon in a git repository with no herd
# setup: activity from hooks ([hook] events: working, waiting, idle) from the
# first turn, the project's own Claude hook still run, Codex never at its
# "Hooks need review" (a second launch straight to its prompt, nothing in
# its config.toml), and `git status` clean.
#
# TestRealClaudeUsage, TestRealCodexUsage and TestRealGeminiUsage (e2e):
# what each agent records of its own token use equals `herd usage --session
# S -o json` (exact tokens; cost by the price table, or Claude Code's own
# figure): Claude Code headless (stream-json result and transcript); the
# interactive Codex and Gemini CLI in tmux with no setup, two turns
# submitted with `herd inject` (Codex's rollout found through the path its
# hooks report; Gemini CLI's chat file, each message once), each equal to
# the mock's known figures per request (the Responses API 1234 input of
# which 1024 cached, 56 output; the Gemini API 2345 of which 2048 cached,
# 67 output). Run them with HERD_REAL_ONLY (below); with --capture,
# TestRealGeminiUsage rewrites internal/usage/testdata's Gemini chat.
#
# TestRealLeadAgent (e2e) runs Claude Code as a lead (mcp = true, manages
# = ["worker"]) under the daemon, the mock scripted to call herd's MCP
# tools (found through ToolSearch: Claude Code defers them): list_sessions,
# send to two simulated workers, wait for idle, read_output; each result
# must come back to the mock and each call be an mcp_call event of the lead.
#
# TestRealClaudeTask, TestRealCodexTask and TestRealGeminiTask (e2e) run
# each agent as a replica of a task role: `herd task add`, the relaunch in
# the task's worktree (what the agent asks in a new folder answered), the
# prompt typed, the mock's shell call committing a misspelt file, the
# check's failure typed back into the same agent, its next call committing
# the fix, the check passed, `herd task approve`, the file on main and
# the worktree gone.
#
# TestRealFreeTextRefusal (e2e) runs Claude Code, Codex and Gemini CLI
# under the daemon with its console, every core kept busy by shell loops
# the test starts: 20 rounds each of the mock's shell call of a command
# that would create a marker file of the round's own, the permission
# dialog listed by the inbox API and answered in words through it (POST
# /api/v1/sessions/NAME/answer, "text"). Every answer must be 200 (a 409
# "the dialog did not close" fails the round), the mock's next request
# carry the call refused and the reply as the last user message, the
# marker never exist, and the agent be idle again. Logs the rounds passed
# and the answers' p50 and max.
#
#   scripts/real-agents.sh              # check
#   scripts/real-agents.sh --capture    # check and rewrite the fixtures of these versions
#   HERD_REAL_ONLY=TestRealLeadAgent SKIP_CODEX=1 SKIP_GEMINI=1 scripts/real-agents.sh
#                                       # only the tests the regexp names (agents and e2e)
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
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
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

# Each check runs whatever the one before did; the script fails if any did.
status=0

# --- HERD_REAL_ONLY: only the named tests -----------------------------------
if [ -n "${HERD_REAL_ONLY:-}" ]; then
  echo "== only ^(${HERD_REAL_ONLY})\$"
  HERD_REAL_CLAUDE="$claude" HERD_REAL_CODEX="$codex" HERD_REAL_GEMINI="$gemini" HERD_CAPTURE_FIXTURES="$capture" \
    go test -count=1 -p 1 -timeout 20m -run "^(${HERD_REAL_ONLY})\$" -v ./internal/agents/ ./e2e/ || status=1
  [ "$status" = 0 ] || echo "FAIL: a real-agent check failed (see above)" >&2
  exit "$status"
fi
# --- end HERD_REAL_ONLY -------------------------------------------------------

echo "== TestRealClaude, TestRealCodex(TUI), TestRealGemini(TUI)"
HERD_REAL_CLAUDE="$claude" HERD_REAL_CODEX="$codex" HERD_REAL_GEMINI="$gemini" HERD_CAPTURE_FIXTURES="$capture" \
  go test -count=1 -timeout 15m -run '^TestReal(Claude|Codex|CodexTUI|Gemini|GeminiTUI)$' -v ./internal/agents/ || status=1
echo "== TestRealClaudeUnderHerd, TestRealClaudeDaemon (the herd daemon supervising the real Claude Code)"
HERD_REAL_CLAUDE="$claude" go test -count=1 -p 1 -timeout 20m -run '^TestRealClaude(UnderHerd|Daemon)$' -v ./e2e/ || status=1
# --- launchers: the agent is the real process ------------------------------
echo "== TestRealLauncherTrees, TestRealLauncherAgents (the real agent under npm's launchers)"
HERD_REAL_CLAUDE="$claude" HERD_REAL_CODEX="$codex" HERD_REAL_GEMINI="$gemini" HERD_CAPTURE_FIXTURES="$capture" \
  go test -count=1 -timeout 5m -run '^TestRealLauncherTrees$' -v ./internal/agents/ || status=1
if [ -n "$codex$gemini" ]; then
  HERD_REAL_CODEX="$codex" HERD_REAL_GEMINI="$gemini" go test -count=1 -p 1 -timeout 20m -run '^TestRealLauncherAgents$' -v ./e2e/ || status=1
fi
# --- end launchers --------------------------------------------------------------
# --- hooks with no setup -----------------------------------------------------
echo "== TestRealZeroSetup{Claude,Codex,Gemini} (hooks from the first turn, no herd setup)"
HERD_REAL_CLAUDE="$claude" HERD_REAL_CODEX="$codex" HERD_REAL_GEMINI="$gemini" \
  go test -count=1 -p 1 -timeout 10m -run '^TestRealZeroSetup(Claude|Codex|Gemini)$' -v ./e2e/ || status=1
# --- end hooks with no setup -------------------------------------------------
# --- the lead agent: Claude Code driving the herd over MCP ------------------
echo "== TestRealLeadAgent (Claude Code calling herd's MCP tools under the daemon)"
HERD_REAL_CLAUDE="$claude" go test -count=1 -p 1 -timeout 10m -run '^TestRealLeadAgent$' -v ./e2e/ || status=1
HERD_REAL_CLAUDE="$claude" HERD_REAL_CODEX="$codex" HERD_REAL_GEMINI="$gemini" \
  go test -count=1 -p 1 -timeout 15m -run '^TestReal(Claude|Codex|Gemini)Task$' -v ./e2e/ || status=1
# --- end lead agent -----------------------------------------------------------
# --- the console: Claude Code's permission dialog answered by a click -------
# TestRealClaudeConsole (e2e) runs Claude Code under the daemon with its
# console on a private loopback port: the mock has it call Bash (echo
# herd-console-ok | tee a file), the inbox API lists the permission dialog
# with the dialog's own answers, a headless chromium logged in through
# `herd web url` clicks "Yes", and the mock gets the tool's result; the
# inbox empties and the answer is an answered event naming the browser.
# TestRealCodexConsole and TestRealGeminiConsole: the same with Codex's
# approval of the mock's escalated shell call and Gemini CLI's permission
# dialog (whose boxed options the console does not read from the screen
# yet: its item is the hook's); skipped with SKIP_CODEX=1, SKIP_GEMINI=1.
# Logs dialog on screen -> inbox and page, click -> tool result at the API.
# Needs chromium (a named skip without it).
echo "== TestReal(Claude|Codex|Gemini)Console (a permission dialog answered by a click in the console)"
HERD_REAL_CLAUDE="$claude" HERD_REAL_CODEX="$codex" HERD_REAL_GEMINI="$gemini" \
  go test -count=1 -p 1 -timeout 15m -run '^TestReal(Claude|Codex|Gemini)Console$' -v ./e2e/ || status=1
# --- end console --------------------------------------------------------------
# --- a reply in words to a permission dialog is a refusal, under load --------
echo "== TestRealFreeTextRefusal (a reply in words refuses the tool, 20 rounds per agent, under load)"
HERD_REAL_CLAUDE="$claude" HERD_REAL_CODEX="$codex" HERD_REAL_GEMINI="$gemini" \
  go test -count=1 -p 1 -timeout 45m -run '^TestRealFreeTextRefusal$' -v ./e2e/ || status=1
# --- end refusal ----------------------------------------------------------------
# --- Gemini CLI and Codex under the daemon: idle, inject, a hung call -------
echo "== TestReal(Gemini|Codex)Turns, TestRealGeminiResumeRefused (idle, herd inject, a hung call, a refused resume)"
HERD_REAL_CODEX="$codex" HERD_REAL_GEMINI="$gemini" \
  go test -count=1 -p 1 -timeout 15m -run '^TestReal((Gemini|Codex)Turns|GeminiResumeRefused)$' -v ./e2e/ || status=1
# --- end turns ----------------------------------------------------------------
if [ "$capture" = 1 ]; then
  echo "== fixture tests on the new captures"
  go test -count=1 ./internal/agents/ || status=1
fi
if [ "$status" != 0 ]; then
  echo "FAIL: a real-agent check failed (see above)" >&2
fi
exit "$status"
