#!/bin/bash
#SBATCH --job-name=srun-train
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=4
#SBATCH --time=4:00:00
#SBATCH --output=%x-%j.out

# Each srun runs on every node: the script does.
srun hostname
srun -N1 -n1 python prepare_data.py
srun --ntasks-per-node=4 --gpus-per-task=1 --label python train.py
