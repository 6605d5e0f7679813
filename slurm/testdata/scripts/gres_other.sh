#!/bin/bash
#SBATCH --gres=gpu:2,shard:1
echo hi
