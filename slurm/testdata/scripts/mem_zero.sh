#!/bin/bash
#SBATCH --mem=0
#SBATCH --gres=gpu:4
#SBATCH -t 2:00:00
python preprocess.py --workers "$SLURM_CPUS_ON_NODE"
