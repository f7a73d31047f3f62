#!/usr/bin/env bash
# Runs lanes of make targets at once: `lanes.sh NAME=target[,target...] ...`. Within a lane the
# targets run in turn and the lane stops at its first failure; the lanes are independent (each
# chaos suite has a cluster of its own, see the Makefile), so every lane runs to its end and a red
# run shows every failure, not only the first. Each lane writes its own log
# (integration/.test_output/lanes/NAME.log), printed whole when the lane ends, so the CI log reads
# suite by suite; one line per target as it starts and ends shows the progress meanwhile. Ends
# with the time per target and per lane; exits non-zero when any target failed.
set -uo pipefail
cd "$(dirname "$0")/.."
(($# > 0)) || { echo "usage: $0 NAME=target[,target...] ..." >&2; exit 2; }

LOG_DIR=integration/.test_output/lanes
TIMES=$(mktemp -d)
trap 'rm -rf "$TIMES"' EXIT
mkdir -p "$LOG_DIR"

stamp() { date -u +%H:%M:%S; }

lane() { # NAME TARGETS: runs them in turn into NAME.log, records "target secs rc" lines
  local name=$1 targets=$2 target start rc=0
  local log=$LOG_DIR/$name.log
  : >"$log"
  for target in ${targets//,/ }; do
    echo "[$(stamp)] $name: $target started"
    start=$(date +%s)
    make --no-print-directory "$target" >>"$log" 2>&1
    rc=$?
    echo "$target $(($(date +%s) - start)) $rc" >>"$TIMES/$name"
    echo "[$(stamp)] $name: $target $( ((rc == 0)) && echo passed || echo "FAILED (exit $rc)") in $(($(date +%s) - start)) s"
    ((rc == 0)) || break
  done
  return "$rc"
}

total_start=$(date +%s)
declare -A pid_lane=()
names=()
for spec in "$@"; do
  name=${spec%%=*}
  [[ $spec == *=* && -n $name && -n ${spec#*=} ]] || { echo "lanes.sh: bad lane '$spec'" >&2; exit 2; }
  names+=("$name")
  lane "$name" "${spec#*=}" &
  pid_lane[$!]=$name
done

status=0
failed=()
while ((${#pid_lane[@]})); do
  wait -n -p done_pid "${!pid_lane[@]}"
  rc=$?
  name=${pid_lane[$done_pid]}
  unset "pid_lane[$done_pid]"
  echo
  echo "================ lane $name ($( ((rc == 0)) && echo passed || echo FAILED)): its log ================"
  cat "$LOG_DIR/$name.log"
  echo "================ end of lane $name ================"
  echo
  if ((rc != 0)); then
    status=1
    failed+=("$name")
  fi
done

# The failures again, short, next to the time table: a log's tail then names what failed.
for name in "${failed[@]}"; do
  echo "---------------- failures of lane $name (the first lines of each report) ----------------"
  awk '/^ +[0-9]+ failing/ { on = 1; n = 0 } on && n < 30 { print; n++ }' "$LOG_DIR/$name.log" | cut -c1-300
done
((${#failed[@]})) && echo

echo "time per suite (lanes ran at once):"
for name in "${names[@]}"; do
  lane_secs=0
  while read -r target secs rc; do
    printf '  %-8s %-24s %3dm %02ds%s\n' "$name" "$target" $((secs / 60)) $((secs % 60)) "$( ((rc == 0)) || echo "  FAILED")"
    lane_secs=$((lane_secs + secs))
  done <"$TIMES/$name"
  printf '  %-8s %-24s %3dm %02ds\n' "$name" "(lane)" $((lane_secs / 60)) $((lane_secs % 60))
done
total=$(($(date +%s) - total_start))
printf '  %-33s %3dm %02ds%s\n' "all lanes" $((total / 60)) $((total % 60)) "$( ((status == 0)) || echo " (failed: ${failed[*]})")"
exit "$status"
