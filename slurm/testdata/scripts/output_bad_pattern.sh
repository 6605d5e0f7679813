#!/bin/bash
#SBATCH -o job-%q.out
echo hello
