#!/bin/bash
#SBATCH --job-name=evaluate
#SBATCH --dependency=afterok:3f2a1b0c:9d8e7f60
#SBATCH --gpus=2
#SBATCH -t 45:00
python eval.py
