#!/bin/bash
# A comment and a blank line do not end the directives.

#SBATCH --job-name=early
##SBATCH --account=disabled
#SBATCH --time=10 # ten minutes
echo starting
#SBATCH --gres=gpu:8
#SBATCH --account=never-read
python main.py
