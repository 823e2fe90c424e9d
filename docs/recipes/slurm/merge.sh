#!/bin/bash
# Merges the shards of eval-shard.sh into results/all once every one of them has ended
# (submit.sh queues it with --dependency=afterany). It merges only when every shard finished
# cleanly; otherwise it names the shards to run again, and how, and exits 1.
#SBATCH --job-name=viga-eval-merge
#SBATCH --cpus-per-task=1
#SBATCH --time=00:30:00

set -euo pipefail
shards=$(cat results/shards)
recipes=${RECIPES:-docs/recipes/slurm}

again=()
for ((shard = 0; shard < shards; shard++)); do
    ended="results/ended/shard-$shard"
    if [[ ! -f $ended ]]; then
        echo "shard $shard did not finish: killed, over its time limit, or cancelled (its log: slurm-*_$shard.out)" >&2
        again+=("$shard")
    elif [[ $(<"$ended") != 0 ]]; then
        echo "shard $shard ended with exit code $(<"$ended"): its log says what failed" >&2
        again+=("$shard")
    fi
done
if ((${#again[@]} > 0)); then
    list=$(IFS=,; echo "${again[*]}")
    echo "Not merged. From this folder, with DATA exported as before, run those shards again (viga eval" >&2
    echo "resumes a shard folder it is given again and scores only what is missing), then this merge:" >&2
    echo "  job=\$(sbatch --parsable --array=$list $recipes/eval-shard.sh)" >&2
    echo "  sbatch --dependency=afterany:\${job%%;*} $recipes/merge.sh" >&2
    exit 1
fi

folders=()
for ((shard = 0; shard < shards; shard++)); do
    folders+=("results/shard-$shard")
done
viga eval merge --into results/all "${folders[@]}"
