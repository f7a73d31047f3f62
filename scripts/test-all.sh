#!/usr/bin/env bash
# `make test`: every suite in turn, stopping at the first failure, then how long each took (also
# after a failure, so a slow or hanging suite shows in the log's tail). Each step is a make target,
# so a failure reproduces with the same command.
set -uo pipefail
cd "$(dirname "$0")/.."
STEPS=(install lint test-unit test-package demo test-integration test-rebalance test-bench)
names=() secs=()
status=0
total_start=$(date +%s)
for step in "${STEPS[@]}"; do
  start=$(date +%s)
  make --no-print-directory "$step"
  status=$?
  names+=("$step")
  secs+=($(($(date +%s) - start)))
  ((status == 0)) || break
done
echo
echo "make test: time per suite"
for i in "${!names[@]}"; do
  printf '  %-18s %3dm %02ds\n' "${names[$i]}" $((secs[i] / 60)) $((secs[i] % 60))
done
total=$(($(date +%s) - total_start))
printf '  %-18s %3dm %02ds%s\n' total $((total / 60)) $((total % 60)) "$( ((status == 0)) || echo " (stopped: ${names[-1]} failed)")"
exit "$status"
