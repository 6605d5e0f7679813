#!/bin/bash
#SBATCH --job-name=legacy
#SBATCH --account=proj123
#SBATCH --qos=high
#SBATCH --mail-type=END,FAIL
#SBATCH --mail-user=alice@example.com
#SBATCH --gres=gpu:2
#SBATCH --frobnicate=yes
python legacy.py
