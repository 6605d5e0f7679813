#!/bin/bash
#SBATCH --bb="capacity=100GB"
#SBATCH --x11
#SBATCH -t 5
echo refused: skein has no burst buffers nor X11
