#!/bin/bash
#SBATCH -J patterns
#SBATCH -o out/%x.%j.%N.%u.out
#SBATCH -e out/%x.%j.%%.err
#SBATCH --open-mode=append
echo hello
