#!/bin/bash
#SBATCH --time=UNLIMITED
#SBATCH --mem-per-cpu=4G
#SBATCH --cpus-per-task=4
./serve_forever.sh
