#!/usr/bin/env bash
# The fuzz runs of docs/testing.md ("Fuzzing"; executions in BENCHMARKS.md): each target for
# RUNS executions (or MAX_TIME seconds, whichever comes first), one process per target, niced
# (the machine is shared), no sanitizer (the engine is safe Rust: the checks are the bodies'
# assertions and panics).
# Usage: fuzz/run-all.sh [RUNS] [targets...]; MAX_TIME=900 fuzz/run-all.sh 10000000 reply ops
set -uo pipefail
cd "$(dirname "$0")"
runs=${1:-10000000}; shift || true
targets=${*:-reply task restore ops edge_request endpoint_request}
for t in $targets; do
  mkdir -p corpus/$t logs
  case $t in task|restore) max_len=16384 ;; *) max_len=4096 ;; esac
  start=$(date +%s)
  nice -n 10 cargo +nightly fuzz run -O -s none $t corpus/$t seeds/$t -- \
    -runs=$runs -max_total_time=${MAX_TIME:-0} -max_len=$max_len -print_final_stats=1 > logs/$t.log 2>&1
  rc=$?
  echo "$t rc=$rc seconds=$(( $(date +%s) - start ))" >> logs/summary.log
done
