#!/bin/sh
#SBATCH --nice=50
#SBATCH -p debug
echo low priority
