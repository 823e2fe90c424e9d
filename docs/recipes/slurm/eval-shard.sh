#!/bin/bash
# One shard of a BlenderGym evaluation, a task of the job array submit.sh queues (docs/eval.md,
# Sharding). It runs in the folder submit.sh was run from, with DATA exported there.
#SBATCH --job-name=viga-eval
#SBATCH --cpus-per-task=4
# The renders below are a 32nd of the work of BlenderGym's own (512x512 at 512 samples: tens of
# minutes a view on a CPU node); a shard of 8 is about 31 instances, each rendered twice (goal
# and proposal) from every view, and fits well within this. The agent (--provider instead of
# --baseline) may take --time-limit (30m) per instance on top: raise it for the agent.
#SBATCH --time=04:00:00

set -euo pipefail
: "${DATA:?export DATA=/path/to/bench_data, the BlenderGym data folder every node sees, before sbatch}"
shard=${SLURM_ARRAY_TASK_ID:?submit this as a job array: bash submit.sh}
shards=$(cat results/shards) || { echo "no results/shards here: submit with submit.sh, which writes it" >&2; exit 2; }

mkdir -p results/ended
# An earlier run's word on this shard no longer holds.
rm -f "results/ended/shard-$shard"
# BlenderGym's own settings are 512 and 512 (comparable with published figures): set them here
# on GPU nodes, and raise --time above.
status=0
viga eval blendergym --data "$DATA" --baseline noop --workers 2 \
    --engine cycles --resolution 256 --samples 64 \
    --shard "$shard/$shards" --out "results/shard-$shard" || status=$?
# What merge.sh reads to know that this shard ended, and how. A shard that was killed (its
# time limit, a node lost, scancel) writes nothing.
echo "$status" > "results/ended/shard-$shard"
exit "$status"
