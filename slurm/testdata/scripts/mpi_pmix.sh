#!/bin/bash
#SBATCH -N 2
#SBATCH --ntasks-per-node=8
#SBATCH --switches=1
#SBATCH --distribution=block:cyclic
# srun --mpi=pmix is refused when it runs; mpirun starts the ranks.
mpirun -np "$SLURM_NTASKS" ./lammps -in in.lj
