#!/bin/bash
#SBATCH --export=NONE
#SBATCH -c 4
#SBATCH --mem-per-cpu=2G
#SBATCH --hint=nomultithread
#SBATCH --cpu-bind=cores
export OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK
echo "cpus $SLURM_CPUS_ON_NODE, tasks $SLURM_TASKS_PER_NODE"
./simulate
