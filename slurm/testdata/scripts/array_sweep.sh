#!/bin/bash
#SBATCH --job-name=sweep
#SBATCH --array=0-99%10
#SBATCH --gres=gpu:a100:1
#SBATCH --time=30
#SBATCH --output=sweep/%A_%a.out
#SBATCH --error=sweep/%A_%a.err

python sweep.py --trial $SLURM_ARRAY_TASK_ID
