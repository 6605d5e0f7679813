#!/bin/bash
#SBATCH --array=1,3,5
echo $SLURM_ARRAY_TASK_ID
