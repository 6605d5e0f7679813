#!/bin/bash
#SBATCH --time=3-06:30
#SBATCH --gpus-per-node=a100:4
python long.py
