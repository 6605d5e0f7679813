#!/bin/bash
#SBATCH -d afterany:7c1d
#SBATCH --time=1-12
#SBATCH --no-requeue
./cleanup.sh
