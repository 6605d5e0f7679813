#!/bin/bash
#SBATCH --export=CUDA_VISIBLE_DEVICES=0
python train.py
