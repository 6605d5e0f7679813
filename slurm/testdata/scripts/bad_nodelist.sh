#!/bin/bash
#SBATCH --nodes=3
#SBATCH --nodelist=gpu[01-02]
echo two named, three asked
