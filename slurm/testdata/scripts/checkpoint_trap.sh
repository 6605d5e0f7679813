#!/bin/bash
#SBATCH -J ckpt
#SBATCH -t 4:00:00
#SBATCH --signal=B:USR1@120
#SBATCH --requeue
#SBATCH --open-mode=append
#SBATCH -o ckpt.log

trap 'echo "checkpointing before the limit"; touch checkpoint.flag' USR1
python train.py --resume &
wait
