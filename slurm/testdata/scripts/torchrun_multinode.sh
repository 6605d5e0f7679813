#!/bin/bash
#SBATCH -J llama-pretrain
#SBATCH -N 4
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=8
#SBATCH --cpus-per-task=96
#SBATCH --mem=0
#SBATCH --exclusive
#SBATCH -t 2-00:00:00
#SBATCH --signal=B:USR1@300
#SBATCH -o %x-%j.log

export OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK
torchrun --nnodes=$SLURM_NNODES --node_rank=$SLURM_NODEID --nproc_per_node=8 \
    --master_addr=$MASTER_ADDR --master_port=$MASTER_PORT train.py
