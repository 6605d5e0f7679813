#!/bin/bash
#SBATCH --job-name=legacy
#SBATCH --account=proj123
#SBATCH --licenses=matlab:1
#SBATCH --tmp=100G
#SBATCH --gres=gpu:2
#SBATCH --frobnicate=yes
python legacy.py
