#!/bin/sh
#SBATCH --test-only
#SBATCH --reservation=maint
echo never submitted
