package slurm

// srunShim is the srun a batch script finds on its PATH: the wrapper
// writes it to its temporary directory on every node and puts that first
// on the PATH. In Slurm the script runs once, on the first node, and
// `srun CMD` starts CMD as every task of the job, on every node. In skein
// the script already runs on every node (one task per node), so srun
// starts CMD here, as this node's share of the step's tasks, and the step
// runs on all nodes because the script does. It is POSIX sh, not the
// skein binary: it runs wherever the script runs, in a container image
// too, where skein is not installed.
//
// Options:
//
//	-N, --nodes=K              the step's tasks run on the first K nodes (ranks
//	                           0..K-1); on the others srun does nothing, exit 0
//	-n, --ntasks=T             T tasks in all, the same number on each of the K
//	                           nodes (T a multiple of K); without -N, T below the
//	                           job's node count means T nodes, one task each
//	--ntasks-per-node=M        M tasks on each node (default T/K, or the job's
//	                           SLURM_NTASKS_PER_NODE: sbatch's -n or
//	                           --ntasks-per-node, else 1)
//	-l, --label                prefix each line of a task's stdout and stderr
//	                           with its task ID: "3: ..."
//	--mpi=none                 accepted; other --mpi values are refused: srun
//	                           starts no MPI wire-up (PMI)
//	the resource options       accepted, with no effect: each task gets the
//	(-G, --gpus, --gpus-per-node, --gpus-per-task, --gres, -c,
//	--cpus-per-task, --mem, --mem-per-cpu, --mem-per-gpu), -J, --job-name,
//	--cpu-bind, --export, --exclusive, --overlap, -u, --unbuffered,
//	-K, --kill-on-bad-exit, -Q, --quiet, -v, --verbose
//
// Every other option is refused (exit 2), naming it. Each task gets
// SLURM_PROCID (this node's rank times M, plus its local index),
// SLURM_LOCALID, and the step's SLURM_NTASKS, SLURM_NPROCS,
// SLURM_STEP_NUM_TASKS, SLURM_STEP_NUM_NODES and SLURM_NTASKS_PER_NODE;
// the job's GPUs are every task's (CUDA_VISIBLE_DEVICES, as the job has
// it; a task picks its own from SLURM_LOCALID). One task without -l is
// exec'd; with more, srun waits for all and exits with the highest exit
// code among them, as Slurm's does. On ranks above 0, each task's
// stdout and stderr are appended to the job's -o and -e files as well,
// so that the files hold every rank's srun output, as Slurm's do. Like
// the wrapper, srun and the labels
// outlive the signals sent to the job's process group (a cancel, --signal
// before the time limit): the tasks get them, and srun waits for them.
const srunShim = `#!/bin/sh
die() { printf 'srun: error: %s\n' "$*" >&2; exit 2; }
num() { case $2 in ''|*[!0-9]*|0*) die "$1 $2: want a whole number above 0";; esac; }
nodes=${SLURM_NNODES:-1} rank=${SKEIN_RANK:-0}
N= n= m= label=
while [ $# -gt 0 ]; do
	o=$1
	case $o in
	--) shift; break ;;
	--*=*) opt=${o%%=*} val=${o#*=} has=1 ;;
	--*|-?) opt=$o val= has= ;;
	-*) opt=${o%"${o#??}"} val=${o#??} has=1 ;;
	*) break ;;
	esac
	shift
	case $opt in
	-N|--nodes|-n|--ntasks|--ntasks-per-node|--mpi|-G|--gpus|--gpus-per-node|--gpus-per-task|--gres|-c|--cpus-per-task|--mem|--mem-per-cpu|--mem-per-gpu|-J|--job-name|--cpu-bind|--export)
		if [ -z "$has" ]; then
			[ $# -gt 0 ] || die "$opt needs a value"
			val=$1
			shift
		fi ;;
	-l|--label|--exclusive|--overlap|-u|--unbuffered|-K|--kill-on-bad-exit|-Q|--quiet|-v|--verbose)
		[ -z "$has" ] || [ "$opt" = --kill-on-bad-exit ] || [ "$opt" = -K ] || die "$o: $opt takes no value" ;;
	*) die "$opt is not supported by skein's srun, which starts the command on this node: the batch script already runs on every node of the job (see docs/slurm.md, Slurm scripts)" ;;
	esac
	case $opt in
	-N|--nodes) num "$opt" "$val"; N=$val ;;
	-n|--ntasks) num "$opt" "$val"; n=$val ;;
	--ntasks-per-node) num "$opt" "$val"; m=$val ;;
	-l|--label) label=1 ;;
	--mpi) [ "$val" = none ] || die "--mpi=$val: skein's srun starts no MPI wire-up (PMI); start MPI programs with mpirun from the script, or give --mpi=none" ;;
	esac
done
[ $# -gt 0 ] || die "missing the command: srun [OPTIONS] COMMAND [ARGS...]"
if [ -n "$N" ]; then
	[ "$N" -le "$nodes" ] || die "-N $N: the job has $nodes nodes"
elif [ -n "$n" ] && [ -z "$m" ] && [ "$n" -lt "$nodes" ]; then
	N=$n
else
	N=$nodes
fi
if [ -n "$m" ]; then
	[ -z "$n" ] || [ "$n" -eq $((N * m)) ] || die "-n $n with --ntasks-per-node=$m on $N nodes: want $((N * m)) tasks"
elif [ -n "$n" ]; then
	[ $((n % N)) -eq 0 ] || die "-n $n on $N nodes: skein's srun runs the same number of tasks on every node; give a multiple of $N"
	m=$((n / N))
else
	case ${SLURM_NTASKS_PER_NODE:-} in
	''|0*|*[!0-9]*) m=1 ;;
	*) m=$SLURM_NTASKS_PER_NODE ;;
	esac
fi
[ "$rank" -lt "$N" ] || exit 0
SLURM_NTASKS=$((N * m)) SLURM_NPROCS=$((N * m)) SLURM_STEP_NUM_TASKS=$((N * m))
SLURM_STEP_NUM_NODES=$N SLURM_NTASKS_PER_NODE=$m
export SLURM_NTASKS SLURM_NPROCS SLURM_STEP_NUM_TASKS SLURM_STEP_NUM_NODES SLURM_NTASKS_PER_NODE
# On the ranks above 0, the tasks' output is appended to the job's -o
# and -e files too (SKEIN_SBATCH_OUT, SKEIN_SBATCH_ERR, which the wrapper
# sets there), as Slurm gathers every task's output of a step in them;
# rank 0's reaches them through the script's own.
copy=
[ "$rank" = 0 ] || [ -z "${SKEIN_SBATCH_OUT:-}" ] || copy=1
if [ "$m" = 1 ] && [ -z "$label" ] && [ -z "$copy" ]; then
	SLURM_PROCID=$rank SLURM_LOCALID=0
	export SLURM_PROCID SLURM_LOCALID
	exec "$@"
fi
# The tasks, their labels and srun outlive the signals a cancel or the
# time limit sends the job's process group, as the wrapper does: the
# command gets them and decides, srun waits for it and passes its exit
# code on, and the labels copy its last words. task records its exit
# code; label prefixes lines as they come (sed would buffer them), and
# appends them to the file $1 names, if any.
task() {
	trap : ` + jobSignals + `
	"$@"
	echo $? >"$t/$SLURM_LOCALID"
}
label() {
	trap '' ` + jobSignals + `
	if [ -n "$label" ]; then
		while IFS= read -r l || [ -n "$l" ]; do printf '%s: %s\n' "$SLURM_PROCID" "$l"; done
	else
		cat
	fi | if [ -n "$1" ]; then tee -a "$1"; else cat; fi
}
out= err=
if [ -n "$copy" ]; then
	out=$SKEIN_SBATCH_OUT err=${SKEIN_SBATCH_ERR:-$SKEIN_SBATCH_OUT}
fi
t=$(mktemp -d "${TMPDIR:-/tmp}/skein-srun.XXXXXX") || exit 1
trap 'rm -rf "$t"' EXIT
trap : ` + jobSignals + `
i=0
while [ "$i" -lt "$m" ]; do
	(
		trap : ` + jobSignals + `
		SLURM_PROCID=$((rank * m + i)) SLURM_LOCALID=$i
		export SLURM_PROCID SLURM_LOCALID
		if [ -z "$label" ] && [ -z "$copy" ]; then
			task "$@"
		else
			{ task "$@" 2>&1 1>&3 3>&- | label "$err" >&2; } 3>&1 | label "$out"
		fi
	) &
	i=$((i + 1))
done
until wait; do :; done
rc=0 i=0
while [ "$i" -lt "$m" ]; do
	r=$(cat "$t/$i" 2>/dev/null) || r=1
	[ "$r" -le "$rc" ] || rc=$r
	i=$((i + 1))
done
exit $rc
`
