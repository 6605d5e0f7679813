#!/bin/bash
#SBATCH --job-name=sweep
#SBATCH --array=0-9%3
#SBATCH --output=logs/%x_%A_%a.out
#SBATCH --error=logs/%x_%A_%a.err
#SBATCH --gpus=1
#SBATCH --time=15

LRS=(1e-2 3e-3 1e-3 3e-4 1e-4 3e-5 1e-5 3e-6 1e-6 3e-7)
echo "task $SLURM_ARRAY_TASK_ID of $SLURM_ARRAY_TASK_COUNT (array $SLURM_ARRAY_JOB_ID)"
python train.py --lr "${LRS[$SLURM_ARRAY_TASK_ID]}"
