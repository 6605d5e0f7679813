#SBATCH --time=10
echo hi
