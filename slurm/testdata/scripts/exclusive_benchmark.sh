#!/bin/bash
# A benchmark that must have its nodes to itself.
#SBATCH --job-name=nccl-bench
#SBATCH --nodes=2
#SBATCH --exclusive
#SBATCH --gpus-per-node=8
#SBATCH --time=00:30:00
srun --ntasks-per-node=8 -l ./all_reduce_perf -b 8 -e 8G
