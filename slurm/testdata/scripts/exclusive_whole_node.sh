#!/bin/bash
#SBATCH --exclusive
#SBATCH --mem=0
#SBATCH --nodes=1
#SBATCH --gres=gpu:8
#SBATCH --constraint=nvlink
nvidia-smi topo -m
python bench.py
