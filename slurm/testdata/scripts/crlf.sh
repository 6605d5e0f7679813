#!/bin/bash
#SBATCH --job-name=windows
#SBATCH --nodes=2
#SBATCH --gpus-per-node=4
echo hi
