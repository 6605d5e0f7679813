#!/bin/sh
#SBATCH -a 7
#SBATCH -o rerun-%3a.out
./run_case.sh $SLURM_ARRAY_TASK_ID
