#!/bin/bash
#SBATCH --job-name=cleanup
#SBATCH --dependency=afternotok:3f2a1b0c:5d6e7f80_3
./notify_failure.sh
