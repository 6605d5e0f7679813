#!/usr/bin/env python3
#SBATCH --job-name="py job"
#SBATCH --mem 2G
#SBATCH -t 01:00:00
print("hello from python")
