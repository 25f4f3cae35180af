#!/usr/bin/env bash
# Evaluate a policy directory on every simulation task; writes docs/eval/<name>-<task>.{json,png}.
#   tools/eval_suite.sh checkpoints/pi05-tiny-sim NAME [EPISODES] [DELAYS] [MODES]
set -euo pipefail
policy=${1:?policy directory or 'oracle'}
name=${2:?name used in the output files}
episodes=${3:-30}
delays=${4:-0,2,4,8}
modes=${5:-sync,naive,vlash,prefix,faster}
mkdir -p docs/eval
for task in reach track whack intercept; do
  vlash eval --task "$task" --policy "$policy" --modes "$modes" --delays "$delays" --episodes "$episodes" \
    --json "docs/eval/$name-$task.json" --plot "docs/eval/$name-$task.png"
done
