#!/bin/bash
#SBATCH --gpus-per-node=4
#SBATCH --cpus-per-gpu=8
#SBATCH --mem-per-gpu=40G
python train.py
