#!/bin/bash
#SBATCH --job-name=legacy
#SBATCH --reservation=maint
#SBATCH --deadline=tomorrow
#SBATCH --mail-type=END,FAIL
#SBATCH --mail-user=alice@example.com
#SBATCH --gres=gpu:2
#SBATCH --frobnicate=yes
python legacy.py
