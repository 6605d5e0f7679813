#!/bin/bash
#SBATCH --nodelist=gpu[01-02]
#SBATCH --exclude=gpu07
#SBATCH --gres=gpu:4
srun hostname
