#!/usr/bin/env bash
# Evaluate a policy (a directory or 'oracle') on several tasks, on the report seed split;
# writes docs/eval/report/<name>-<task>.{json,png}.
#   tools/eval_suite.sh POLICY NAME [EPISODES] [DELAYS] [MODES] [TASKS] [EXTRA vlash eval ARGS...]
#   e.g. tools/eval_suite.sh oracle oracle-velocity-load 50 0,2,4,8 sync,naive,vlash hold --sim-config velocity-load
set -euo pipefail
policy=${1:?policy directory or 'oracle'}
name=${2:?name used in the output files}
episodes=${3:-50}
delays=${4:-0,2,4,8}
modes=${5:-sync,naive,vlash,prefix,rtc,faster,ensemble}
tasks=${6:-reach hold track whack intercept}
shift $(( $# < 6 ? $# : 6 ))
mkdir -p docs/eval/report
for task in $tasks; do
  vlash eval --task "$task" --policy "$policy" --modes "$modes" --delays "$delays" --episodes "$episodes" \
    --split report --json "docs/eval/report/$name-$task.json.gz" --plot "docs/eval/report/$name-$task.png" "$@"
done
