#!/bin/bash
#SBATCH --time=1:2:3:4
echo hi
