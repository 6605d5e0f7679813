#!/bin/bash
#SBATCH --job-name=nightly
#SBATCH --account=proj123
#SBATCH --qos=high
#SBATCH --mail-type=END,FAIL
#SBATCH --mail-user=alice@example.com
#SBATCH --comment="nightly eval"
#SBATCH --wait-all-nodes=1
#SBATCH --nodes=2
#SBATCH --gpus-per-node=1
srun python eval.py
