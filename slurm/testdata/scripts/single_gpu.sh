#!/bin/bash
#SBATCH --job-name=finetune
#SBATCH --gres=gpu:1
#SBATCH --cpus-per-task=8
#SBATCH --mem=32G
#SBATCH --time=04:00:00
#SBATCH --output=logs/%x-%j.out

module load cuda/12.1
python finetune.py --config configs/base.yaml
