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
package slurm
