#!/bin/bash
#SBATCH --job-name=nightly
#SBATCH --dependency=singleton,afterany:3f2a1b0c
./nightly.sh
