#!/bin/bash
# Exit statuses when the (only) server is killed mid-run: a holder running
# its command, and a waiter. Usage: bash review15/server_killed.sh
cd "$(dirname "$0")/.." || exit 1
. scripts/lib.sh
zkr_server_start >/dev/null 2>&1
Z=./zkr
export ZKR_SERVER
$Z --session-timeout 3000 lock /k/a -- sleep 30 & holder=$!
sleep 1.5
$Z --session-timeout 3000 lock /k/a -- true & waiter=$!
$Z --session-timeout 3000 elect /k/e -- sleep 30 & leader=$!
sleep 1.5
kill -9 "$ZKR_SERVER_PID"
t0=$(date +%s.%N)
wait $holder; echo "holder: rc=$? after $(echo "$(date +%s.%N) - $t0" | bc)s"
wait $waiter; echo "waiter: rc=$? after $(echo "$(date +%s.%N) - $t0" | bc)s"
wait $leader; echo "leader: rc=$? after $(echo "$(date +%s.%N) - $t0" | bc)s"
