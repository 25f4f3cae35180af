#!/usr/bin/env bash
# Evaluate a policy (a directory or 'oracle') on several tasks, on the report seed split;
# writes <name>-<task>.{json.gz,png} into $EVAL_SUITE_OUT (default docs/eval/report, the shipped results).
#   tools/eval_suite.sh POLICY NAME [EPISODES] [DELAYS] [MODES] [TASKS] [EXTRA vlash eval ARGS...]
#   e.g. tools/eval_suite.sh oracle oracle-velocity-load 50 0,2,4,8 sync,naive,vlash hold --sim-config velocity-load
#   EVAL_SUITE_OUT=/tmp/mine tools/eval_suite.sh oracle oracle 1 0 sync reach   # a smoke run outside the tree
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: tools/eval_suite.sh POLICY NAME [EPISODES] [DELAYS] [MODES] [TASKS] [EXTRA vlash eval ARGS...]" >&2
  exit 2
fi
policy=$1  # a policy directory or 'oracle'
name=$2  # the output files' prefix
episodes=${3:-50}
delays=${4:-0,2,4,8}
modes=${5:-sync,naive,vlash,prefix,rtc,faster,ensemble}
tasks=${6:-reach hold track whack intercept}
out=${EVAL_SUITE_OUT:-docs/eval/report}
shift $(( $# < 6 ? $# : 6 ))
mkdir -p "$out"
for task in $tasks; do
  vlash eval --task "$task" --policy "$policy" --modes "$modes" --delays "$delays" --episodes "$episodes" \
    --split report --json "$out/$name-$task.json.gz" --plot "$out/$name-$task.png" "$@"
done
