#!/bin/bash
#SBATCH -J ds
#SBATCH -N 2
#SBATCH --gpus-per-node=2
#SBATCH --cpus-per-gpu=4
#SBATCH --mem-per-gpu=16G
#SBATCH -t 1:00:00
#SBATCH -A ml-team
#SBATCH --qos=normal

hostfile=hostfile-$SLURM_JOB_ID
scontrol show hostnames "$SLURM_JOB_NODELIST" | while read -r h; do
    echo "$h slots=$SLURM_GPUS_ON_NODE"
done > "$hostfile"
deepspeed --hostfile "$hostfile" train.py --deepspeed ds_config.json
