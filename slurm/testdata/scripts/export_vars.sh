#!/bin/bash
#SBATCH --export=ALL,WANDB_PROJECT=llm,HF_HOME
#SBATCH --chdir=experiments/run1
python train.py
