#!/bin/bash
# The twentieth session's measurements (Intel Xeon with AMX, 2 vCPUs) at the session's final
# code, with OLD_BIN = relpos_bench_train built at the session's start (b111f7a):
#   OLD_BIN=... bench/results/2026-12-04-epilogues/run.sh
# (bench/session_measurements.sh says what it runs; the nineteenth session's run.sh was the same
# sequence written out.)
exec "$(dirname "$0")/../../session_measurements.sh" "$(dirname "$0")"
