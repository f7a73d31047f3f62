#!/usr/bin/env bash
# `make test`: install and build, then every suite in five lanes at once (scripts/lanes.sh): the
# checks without a broker (the companion binding is built first), the integration suite and the
# bench smoke run on the shared broker, the exactly-once chaos suite on a broker of its own and
# then the companion's suite on the shared one, and the two rebalance chaos suites on clusters of
# their own. Each step is a make target, so a failure reproduces with the same command. Ends with
# the time per suite (also after a failure, so a slow or hanging suite shows in the log's tail).
set -uo pipefail
cd "$(dirname "$0")/.."
total_start=$(date +%s)
secs_of() { printf '%dm %02ds' $(($1 / 60)) $(($1 % 60)); }

start=$(date +%s)
make --no-print-directory install build kafka-fetch
status=$?
setup=$(($(date +%s) - start))
if ((status == 0)); then
  bash scripts/lanes.sh \
    checks=fast-binding,lint,test-api,test-unit,test-package,demo \
    broker=test-integration,test-bench \
    chaos=test-chaos-rebalance \
    eos=test-chaos-exactly-once,test-fast-binding \
    chaos3=test-rebalance-broker
  status=$?
fi
echo
echo "make test: install + build + broker jars $(secs_of "$setup"), total $(secs_of $(($(date +%s) - total_start)))$( ((status == 0)) || echo " (FAILED)")"
exit "$status"
