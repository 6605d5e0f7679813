#!/bin/bash
#SBATCH --dependency=afternotok:3f2a1b0c
./notify_failure.sh
