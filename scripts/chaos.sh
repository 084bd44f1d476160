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
#
# Then the full-size campaigns the test command runs short
# (HERD_CAMPAIGN=full): PostgreSQL outages (four, over 150 agents),
# partitions (twenty, in network namespaces; root), tasks (200 through 10
# agents, with agent, tmux server and daemon kills; 40 through a fleet of
# two, six hosts lost) and the reaper's soak
# (200 sessions). CHAOS_CAMPAIGNS=0 leaves them out.
set -eu
cd "$(dirname "$0")/.."
minutes="${CHAOS_MINUTES:-10}"
timeout=$(awk -v m="$minutes" 'BEGIN { printf "%dm", m * 2 + 10 }')
rc=0
HERD_CHAOS=1 CHAOS_MINUTES="$minutes" go test -count=1 -run '^TestChaos$' -v -timeout "$timeout" ./e2e/ || rc=$?
if [ "${CHAOS_CAMPAIGNS:-1}" != 0 ]; then
  HERD_CAMPAIGN=full go test -count=1 -run '^(TestPostgresOutageCampaign|TestPartitionFencing|TestTaskCampaign|TestFleetTaskCampaign)$' -v -timeout 60m ./e2e/ || rc=$?
  HERD_REAP_SOAK=5 go test -count=1 -run '^TestReapSoak$' -v -timeout 20m ./internal/daemon/ || rc=$?
fi
exit "$rc"
