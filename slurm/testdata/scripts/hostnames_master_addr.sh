#!/bin/bash
#SBATCH --job-name=ddp
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --gres=gpu:2
#SBATCH --time=00:30:00
#SBATCH --output=ddp_%j.out

# The usual way to find the rendezvous host in a Slurm script.
nodes=( $(scontrol show hostnames "$SLURM_JOB_NODELIST") )
head_node=${nodes[0]}
echo "head ${head_node} of ${#nodes[@]} nodes, job ${SLURM_JOB_ID} in ${SLURM_JOB_PARTITION}"
srun torchrun --nnodes "$SLURM_NNODES" --nproc_per_node 2 \
    --rdzv_id "$SLURM_JOB_ID" --rdzv_backend c10d --rdzv_endpoint "$head_node:29500" train.py
