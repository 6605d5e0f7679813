#!/bin/bash
#SBATCH -t 5:30
#SBATCH -c 2
echo quick
