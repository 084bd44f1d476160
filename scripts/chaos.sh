#!/bin/sh
# The fault campaign: the real herd binary (race-built) against pid reuse,
# daemon SIGKILLs, racing CLIs, a lying tmux, garbled inputs, resource
# faults and simulated reboots, with canary processes that are not herd's.
# Prints a table per fault family. Not part of scripts/test.sh.
#
#   scripts/chaos.sh                 # about 10 minutes
#   CHAOS_MINUTES=3 scripts/chaos.sh # shorter
#
# A family fails when it injected no fault, when a fault got through, or
# when herd did not get every agent running again after a fault ended (an
# API answer of 5xx counts too). Needs tmux. Without root, the pid reuse
# family (it writes /proc/sys/kernel/ns_last_pid) is reported SKIPPED, and
# the full-disk faults (a tmpfs mount) are listed as not injected.
set -eu
cd "$(dirname "$0")/.."
minutes="${CHAOS_MINUTES:-10}"
timeout=$(awk -v m="$minutes" 'BEGIN { printf "%dm", m * 2 + 10 }')
HERD_CHAOS=1 CHAOS_MINUTES="$minutes" exec go test -count=1 -run '^TestChaos$' -v -timeout "$timeout" ./e2e/
