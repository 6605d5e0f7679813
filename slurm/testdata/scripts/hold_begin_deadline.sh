#!/bin/bash
#SBATCH --hold
#SBATCH --begin=2030-01-02T03:04
#SBATCH --deadline=2030-01-03
#SBATCH --time=2:00:00
echo later
