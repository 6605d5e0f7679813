#!/bin/bash
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=8
srun python mpi_job.py
