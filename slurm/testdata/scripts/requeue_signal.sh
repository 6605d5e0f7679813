#!/bin/bash
#SBATCH --requeue
#SBATCH --time=6:00:00
#SBATCH --signal=SIGUSR2@120
#SBATCH --gpus-per-task=2
#SBATCH --ntasks=1
python train.py --resume
