#!/bin/bash
#SBATCH --signal=USR1@60
echo hi
