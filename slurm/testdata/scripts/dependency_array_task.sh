#!/bin/bash
#SBATCH --dependency=afterok:120_3:121
#SBATCH --kill-on-invalid-dep=yes
#SBATCH -t 10
python aggregate.py
