#!/bin/bash
#SBATCH -N 3
#SBATCH --gpus=8
python train.py
