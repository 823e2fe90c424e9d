#!/bin/bash
# Runs a sharded BlenderGym evaluation on Kubernetes: the shards (eval-jobs.yaml), then, once
# every one has completed, the merge (merge-job.yaml), whose log it prints.
#   bash docs/recipes/kubernetes/run.sh
# Name your image and volumes in both files first. It starts by deleting the two Jobs of an
# earlier run: their results stay on the volume, and each shard resumes its folder.

set -euo pipefail
RECIPES=$(cd "$(dirname "$0")" && pwd)

# Waits until the Job $1 has ended and prints how: Complete or Failed. (`kubectl wait` waits
# for one condition only.)
ended() {
    local conditions
    while true; do
        conditions=$(kubectl get job "$1" \
            -o jsonpath='{range .status.conditions[?(@.status=="True")]}{.type}{" "}{end}')
        case " $conditions" in
            *" Complete "*) echo Complete; return ;;
            *" Failed "*) echo Failed; return ;;
        esac
        sleep 60
    done
}

kubectl delete job viga-blendergym viga-blendergym-merge --ignore-not-found
kubectl apply -f "$RECIPES/eval-jobs.yaml"
if [[ $(ended viga-blendergym) == Failed ]]; then
    failed=$(kubectl get job viga-blendergym -o jsonpath='{.status.failedIndexes}')
    echo "Not merged: shards ${failed:-(none failed; the Job ran past its time limit)} did not finish." >&2
    echo "Their logs: kubectl logs -l job-name=viga-blendergym --prefix. Then run this again: finished" >&2
    echo "shards are skipped (viga eval resumes a folder), the others score only what is missing." >&2
    exit 1
fi

kubectl apply -f "$RECIPES/merge-job.yaml"
state=$(ended viga-blendergym-merge)
kubectl logs job/viga-blendergym-merge
[[ $state == Complete ]]
