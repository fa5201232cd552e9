#!/bin/bash
# REPRO (review15): `systemctl stop` of examples/systemd/zkr-leader@.service
# sends SIGTERM to zkr (KillMode=mixed); zkr elect --requeue then exits
# 143, which systemd counts as a failure (no SuccessExitStatus=143 in the
# unit): every clean stop leaves the unit "failed" (Result: exit-code).
# Usage: ZKR_SERVER=host:port bash review15/systemd_stop_status.sh
cd "$(dirname "$0")/.." || exit 1
./zkr elect --requeue --grace 1 /review15/svc -c 'sleep 100' & z=$!
sleep 1.5
kill -TERM $z
wait $z; rc=$?
echo "zkr elect --requeue after SIGTERM: exit $rc"
grep -n 'SuccessExitStatus' examples/systemd/zkr-leader@.service ||
    echo "unit has no SuccessExitStatus=143: systemd marks the stop failed"
[ "$rc" -ne 143 ]
