// Package slurm turns a Slurm batch script and sbatch's command-line
// options into a skein job, for `skein sbatch`. It is pure: it reads the
// script's bytes and the options it is given, and returns a
// structs.JobSpec whose command runs the script on every node of the job
// (one task per node), or an error naming the directive, its line and the
// limit it broke.
//
// Directives are read as sbatch reads them: only from the comment block at
// the top of the script, after the #! line; the first line that is neither
// blank nor a comment ends them. Options given on the command line override
// the directives. An option skein has no equivalent for is refused with
// every such option listed, unless the caller asks for warnings instead.
//
// The job's command is a small POSIX sh wrapper (wrapper.go) that writes
// the script to a temporary file on the node and runs it with the
// interpreter its #! line names; on rank 0 it also copies the script's
// stdout and stderr into the files -o and -e name, whose %j, %N and other
// patterns it expands there from the variables skein gives every job.
//
// The model differs from Slurm's in one way a script can see: Slurm runs
// the batch script once, on the first node, and `srun CMD` in it starts
// CMD as the job's tasks on every node; skein runs the script on every
// node, one task per node. So the wrapper puts an srun of its own
// (srun.go, also POSIX sh) first on the script's PATH, which starts CMD
// here, as this node's share of the step: the step spans the job's nodes
// because the script does. It honours -N (the step's first nodes; srun
// does nothing on the others), -n and --ntasks-per-node (that many local
// copies, each with its SLURM_PROCID and SLURM_LOCALID; by default the
// job's own --ntasks-per-node, which sbatch takes for srun's sake) and
// -l, accepts
// the resource options without effect (each task has the node's share of
// the job), and refuses every other option, naming it. What the script
// does outside srun runs on every node, not once.
//
// --dependency maps to JobSpec.After (afterok, afterany, afternotok) and
// JobSpec.Singleton; --exclusive to JobSpec.Exclusive: package sched
// decides them.
package slurm
