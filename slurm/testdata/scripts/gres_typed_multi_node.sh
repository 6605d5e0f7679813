#!/bin/bash
#SBATCH --nodes=2
#SBATCH --gres=gpu:h100:8
#SBATCH --mem=512G
#SBATCH --partition=gpu
#SBATCH --constraint=ib&nvlink
#SBATCH --time=12:00:00
srun python train.py
