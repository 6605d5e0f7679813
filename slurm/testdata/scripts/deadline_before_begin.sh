#!/bin/bash
#SBATCH --begin=2030-01-03
#SBATCH --deadline=2030-01-02
echo never
