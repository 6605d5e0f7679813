#!/bin/bash
#SBATCH -N 2
#SBATCH -G 16
#SBATCH --mem-per-gpu=40G
#SBATCH -t 0-08
torchrun --nnodes=2 --nproc_per_node=8 train.py
