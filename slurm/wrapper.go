package slurm

import (
	"fmt"
	"strings"
)

// wrapperName is $0 of the wrapper, as `ps` shows it.
const wrapperName = "skein-sbatch"

// jobSignals are the signals the wrapper and its tee processes outlive:
// a cancel or the --signal before the time limit reaches the job's whole
// process group, and the script must be the one to act on it, while the
// wrapper waits for it and tee copies its last words. The wrapper traps
// them (its children get them as usual); the tees ignore them and end
// when the script's output does.
const jobSignals = "HUP INT QUIT TERM USR1 USR2 ALRM"

// wrapperBody runs the script ($1, the rest its arguments) with run(),
// defined before it, on every rank, with an srun ($srun, srunShim) and
// an scontrol ($scontrol, scontrolShim) first on its PATH; rank 0 also
// copies stdout and stderr to $o and $e, opened before the script starts
// (open), as Slurm opens them, and the other ranks give srun $o and $e
// (SKEIN_SBATCH_OUT, SKEIN_SBATCH_ERR) to append their tasks' output to.
// The script goes
// to a temporary file of the job's user, and srun to a temporary
// directory, both removed at the end, so that its interpreter reads it as
// a file, $0 naming it.
const wrapperBody = `f=$(mktemp "${TMPDIR:-/tmp}/skein-sbatch.XXXXXX") || exit 1
d=
trap 'rm -f "$f"; [ -z "$d" ] || rm -rf "$d"' EXIT
trap : ` + jobSignals + `
printf '%s' "$1" >"$f" || exit 1
shift
d=$(mktemp -d "${TMPDIR:-/tmp}/skein-sbatch.XXXXXX") || exit 1
mkdir "$d/bin" && printf '%s' "$srun" >"$d/bin/srun" && printf '%s' "$scontrol" >"$d/bin/scontrol" &&
	chmod 755 "$d/bin/srun" "$d/bin/scontrol" || exit 1
PATH=$d/bin:$PATH
export PATH
if [ "$SKEIN_RANK" != 0 ]; then
	SKEIN_SBATCH_OUT=$o SKEIN_SBATCH_ERR=$e
	export SKEIN_SBATCH_OUT SKEIN_SBATCH_ERR
	run "$@"
	exit $?
fi
open "$o" || exit 1
[ "$e" = "$o" ] || open "$e" || exit 1
mkfifo "$d/out" "$d/err" || exit 1
(trap '' ` + jobSignals + `; exec tee -a "$o" <"$d/out") &
(trap '' ` + jobSignals + `; exec tee -a "$e" <"$d/err" >&2) &
run "$@" >"$d/out" 2>"$d/err"
rc=$?
until wait; do :; done
exit $rc
`

// command is the job's command: sh runs the wrapper, which runs the
// script with its interpreter and args, srun on its PATH.
func command(b *Batch, script []byte, args []string) ([]string, error) {
	out, err := expandPattern(b.Output, b.Spec.Name)
	if err != nil {
		return nil, err
	}
	errFile := `"$o"`
	if b.Error != "" {
		if errFile, err = expandPattern(b.Error, b.Spec.Name); err != nil {
			return nil, err
		}
	}
	var w strings.Builder
	fmt.Fprintf(&w, "run() { %s \"$f\" \"$@\"; }\n", quoteWords(b.Interpreter))
	redirect := ">"
	if b.Append {
		redirect = ">>"
	}
	fmt.Fprintf(&w, "open() { true %s\"$1\"; }\n", redirect) // not :, whose failed redirection would end sh
	fmt.Fprintf(&w, "o=%s\ne=%s\nsrun=%s\nscontrol=%s\n", out, errFile, shellQuote(srunShim), shellQuote(scontrolShim))
	if m := b.TasksPerNode; m > 1 {
		// The job's tasks as Slurm counts them, which srun starts.
		fmt.Fprintf(&w, "SLURM_NTASKS_PER_NODE=%d SLURM_NTASKS=$((${SLURM_NNODES:-1} * %d)) SLURM_TASKS_PER_NODE=%d\n", m, m, m)
		w.WriteString("[ \"${SLURM_NNODES:-1}\" = 1 ] || SLURM_TASKS_PER_NODE=\"$SLURM_TASKS_PER_NODE(x$SLURM_NNODES)\"\n")
		w.WriteString("SLURM_NPROCS=$SLURM_NTASKS\nexport SLURM_NTASKS_PER_NODE SLURM_NTASKS SLURM_NPROCS SLURM_TASKS_PER_NODE\n")
	}
	w.WriteString(wrapperBody)
	return append([]string{"/bin/sh", "-c", w.String(), wrapperName, string(script)}, args...), nil
}

// shellQuote quotes s for sh as one word.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func quoteWords(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = shellQuote(w)
	}
	return strings.Join(q, " ")
}

// expandPattern turns an -o or -e file name pattern into a sh word that
// the wrapper expands on the node, from the variables skein gives every
// job:
//
//	%j  the job's number (an array task's own)        $SLURM_JOB_ID
//	%A  the array's number (a plain job's own)        $SLURM_ARRAY_JOB_ID
//	%a  the task's index (4294967294 outside arrays)  $SLURM_ARRAY_TASK_ID
//	%x  the job name                                  known at submit
//	%N  rank 0's node's name                          $SKEIN_HEAD_NODE
//	%n, %t  0, the node and task of the batch step
//	%u  the job's user                                $USER
//	%s  the step: batch
//	%%  a %
//
// A digit between % and the letter pads a number with zeros to that
// width (%3a: 007). A pattern with a backslash is taken as it is, the
// backslashes dropped, as in Slurm.
func expandPattern(p, name string) (string, error) {
	if p == "" {
		return "", badValue("empty file name")
	}
	if strings.Contains(p, `\`) {
		return shellQuote(strings.ReplaceAll(p, `\`, "")), nil
	}
	var w strings.Builder
	lit := func(s string) {
		if s != "" {
			w.WriteString(shellQuote(s))
		}
	}
	for {
		i := strings.IndexByte(p, '%')
		if i < 0 {
			lit(p)
			break
		}
		lit(p[:i])
		p = p[i+1:]
		width := ""
		if p != "" && p[0] >= '0' && p[0] <= '9' {
			width, p = p[:1], p[1:]
		}
		if p == "" {
			return "", badValue("file name ends in %%: write %%%% for a %%")
		}
		num := func(v string) string {
			if width == "" {
				return `"` + v + `"`
			}
			return `"$(printf %0` + width + `d "` + v + `")"`
		}
		switch p[0] {
		case 'j':
			w.WriteString(num(`$SLURM_JOB_ID`))
		case 'A':
			w.WriteString(num(`${SLURM_ARRAY_JOB_ID:-$SLURM_JOB_ID}`))
		case 'a':
			w.WriteString(num(`${SLURM_ARRAY_TASK_ID:-4294967294}`))
		case 'x':
			lit(name)
		case 'N':
			w.WriteString(`"${SKEIN_HEAD_NODE:-$SKEIN_NODE}"`)
		case 'n', 't':
			w.WriteString(num(`0`))
		case 'u':
			w.WriteString(`"$USER"`)
		case 's':
			lit("batch")
		case '%':
			lit("%")
		default:
			return "", badValue("file name pattern %%%c: skein expands %%j %%A %%a %%x %%N %%n %%t %%u %%s and %%%%", p[0])
		}
		p = p[1:]
	}
	if w.Len() == 0 {
		return "", badValue("the file name is empty once expanded")
	}
	return w.String(), nil
}

// Script returns the batch script and its arguments from a job's command
// that sbatch made (the wrapper's), and false for any other command.
func Script(command []string) (script string, args []string, ok bool) {
	if len(command) < 5 || command[0] != "/bin/sh" || command[1] != "-c" || command[3] != wrapperName {
		return "", nil, false
	}
	return command[4], command[5:], true
}

// Describe says in one line what a job's command runs: for sbatch's
// wrapper, the batch script (its #! line and size) and its arguments,
// not the wrapper's text; "" for any other command.
func Describe(command []string) string {
	script, args, ok := Script(command)
	if !ok {
		return ""
	}
	first, _, _ := strings.Cut(script, "\n")
	lines := strings.Count(strings.TrimSuffix(script, "\n"), "\n") + 1
	d := fmt.Sprintf("batch script (%s, %d lines)", strings.TrimSpace(first), lines)
	for _, a := range args {
		if a == "" || strings.ContainsFunc(a, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%", r))
		}) {
			a = shellQuote(a)
		}
		d += " " + a
	}
	return d
}
