#!/bin/bash
# Submits a sharded BlenderGym evaluation to Slurm: the shards as a job array (eval-shard.sh),
# then the merge (merge.sh), which runs once every shard has ended, however it ended.
#   export DATA=/shared/bench_data   # BlenderGym's data folder, the same path on every node
#   bash docs/recipes/slurm/submit.sh   # SHARDS=16 bash … for another number of shards
# Run it from a folder every node sees: the results go to results/ there.

set -euo pipefail
: "${DATA:?export DATA=/path/to/bench_data, the BlenderGym data folder every node sees, first}"
SHARDS=${SHARDS:-8}
RECIPES=$(cd "$(dirname "$0")" && pwd)
export RECIPES

mkdir -p results
# The number of shards is kept with the results, and every shard and the merge read it there,
# so a shard run again splits the data as the first run did.
if [[ -f results/shards && $(<results/shards) != "$SHARDS" ]]; then
    echo "results/ holds an evaluation in $(<results/shards) shards: submit with SHARDS=$(<results/shards), or from another folder" >&2
    exit 2
fi
echo "$SHARDS" > results/shards

# --parsable prints the job id (and ";cluster" on a federation).
array=$(sbatch --parsable --array="0-$((SHARDS - 1))" "$RECIPES/eval-shard.sh")
array=${array%%;*}
# afterany, not afterok: with afterok one failed shard would leave the merge pending forever.
# The merge checks every shard itself and says which to run again.
merge=$(sbatch --parsable --dependency="afterany:$array" "$RECIPES/merge.sh")
echo "shards: job $array (logs slurm-${array}_<shard>.out); merge: job ${merge%%;*} (log slurm-${merge%%;*}.out), into results/all"
