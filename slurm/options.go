package slurm

import (
	"fmt"
	"strings"
)

// argKind says whether an option takes a value.
type argKind int

const (
	argNone     argKind = iota // --requeue
	argRequired                // --time=1:00:00, --time 1:00:00, -t 1:00:00, -t1:00:00
	argOptional                // --exclusive, --exclusive=user (only with =)
)

// option is one sbatch option skein knows: one it maps (apply), one it
// accepts with a warning (warn says why it has no effect: it would not
// change what the job gets), or one it refuses (refused says why: it
// would).
type option struct {
	long  string
	short byte
	arg   argKind
	// group names the setting the option makes: of the options of one
	// group, the last given wins (the command line's after the script's).
	// Empty: the option's own name.
	group   string
	apply   func(b *builder, v string) error
	warn    string
	refused string
	// cmdline: only on the command line, never in a script (skein's own).
	cmdline bool
}

func (o *option) key() string {
	if o.group != "" {
		return o.group
	}
	return o.long
}

// options are the sbatch options skein maps, then those it refuses and
// why. Any other option is refused as unknown.
var options = []*option{
	{long: "job-name", short: 'J', arg: argRequired, apply: (*builder).jobName},
	{long: "nodes", short: 'N', arg: argRequired, apply: (*builder).nodes},
	{long: "ntasks", short: 'n', arg: argRequired, apply: (*builder).setNtasks},
	{long: "ntasks-per-node", arg: argRequired, apply: (*builder).ntasksPerNode},
	{long: "gres", arg: argRequired, group: "gpus", apply: (*builder).gres},
	{long: "gpus-per-node", arg: argRequired, group: "gpus", apply: (*builder).gpusPerNode},
	{long: "gpus-per-task", arg: argRequired, group: "gpus", apply: (*builder).gpusPerTask},
	{long: "gpus", short: 'G', arg: argRequired, group: "gpus", apply: (*builder).setGPUsTotal},
	{long: "cpus-per-task", short: 'c', arg: argRequired, apply: (*builder).cpusPerTask},
	{long: "mem", arg: argRequired, group: "mem", apply: (*builder).mem},
	{long: "mem-per-cpu", arg: argRequired, group: "mem", apply: (*builder).setMemPerCPU},
	{long: "mem-per-gpu", arg: argRequired, group: "mem", apply: (*builder).setMemPerGPU},
	{long: "time", short: 't', arg: argRequired, apply: (*builder).time},
	{long: "signal", arg: argRequired, apply: (*builder).signal},
	{long: "array", short: 'a', arg: argRequired, apply: (*builder).array},
	{long: "dependency", short: 'd', arg: argRequired, apply: (*builder).dependency},
	{long: "output", short: 'o', arg: argRequired, apply: (*builder).output},
	{long: "error", short: 'e', arg: argRequired, apply: (*builder).errorFile},
	{long: "open-mode", arg: argRequired, apply: (*builder).openMode},
	{long: "constraint", short: 'C', arg: argRequired, apply: (*builder).constraint},
	{long: "partition", short: 'p', arg: argRequired, apply: (*builder).partition},
	{long: "exclusive", arg: argOptional, apply: (*builder).exclusive},
	{long: "requeue", arg: argNone, group: "requeue", apply: (*builder).requeue},
	{long: "no-requeue", arg: argNone, group: "requeue", apply: (*builder).noRequeue},
	{long: "export", arg: argRequired, apply: (*builder).export},
	{long: "chdir", short: 'D', arg: argRequired, apply: (*builder).chdir},
	{long: "parsable", arg: argNone, apply: (*builder).parsable},
	{long: "wait", short: 'W', arg: argNone, apply: (*builder).wait},
	{long: "wrap", arg: argRequired, cmdline: true, apply: func(*builder, string) error { return nil }},
	{long: ignoreUnknown, arg: argNone, cmdline: true, apply: func(*builder, string) error { return nil }},

	{long: "account", short: 'A', arg: argRequired, apply: (*builder).account},
	{long: "qos", short: 'q', arg: argRequired, apply: (*builder).qos},
	{long: "hold", short: 'H', arg: argNone, apply: (*builder).hold},
	{long: "begin", short: 'b', arg: argRequired, apply: (*builder).begin},
	{long: "deadline", arg: argRequired, apply: (*builder).deadline},
	{long: "nodelist", short: 'w', arg: argRequired, apply: (*builder).nodelist},
	{long: "exclude", short: 'x', arg: argRequired, apply: (*builder).exclude},
	{long: "cpus-per-gpu", arg: argRequired, apply: (*builder).cpusPerGPU},
	{long: "mincpus", arg: argRequired, apply: (*builder).minCPUs},
	{long: "priority", arg: argRequired, group: "priority", apply: (*builder).priority},
	{long: "nice", arg: argOptional, group: "priority", apply: (*builder).nice},
	{long: "wait-all-nodes", arg: argRequired, apply: (*builder).waitAllNodes},
	{long: "kill-on-invalid-dep", arg: argRequired, apply: (*builder).killOnInvalidDep},
	{long: "mail-type", arg: argRequired, apply: (*builder).mailType},
	{long: "mail-user", arg: argRequired, apply: (*builder).mailUser},

	{long: "comment", arg: argRequired, warn: "skein keeps no job comments"},
	{long: "wckey", arg: argRequired, warn: "skein has no workload keys"},
	{long: "acctg-freq", arg: argRequired, warn: "skein samples a job's usage at its own pace"},
	{long: "profile", arg: argRequired, warn: "skein has no profiling"},
	{long: "get-user-env", arg: argOptional, warn: "a skein job gets its account's HOME, USER and SHELL, and what --export names"},
	{long: "propagate", arg: argOptional, warn: "skein does not propagate your resource limits"},
	{long: "cpu-bind", arg: argRequired, warn: "skein does not bind CPUs"},
	{long: "mem-bind", arg: argRequired, warn: "skein does not bind memory"},
	{long: "hint", arg: argRequired, warn: "skein does not bind CPUs"},
	{long: "gpu-bind", arg: argRequired, warn: "skein binds GPUs itself (CUDA_VISIBLE_DEVICES)"},
	{long: "gpu-freq", arg: argRequired, warn: "skein does not set GPU clocks"},
	{long: "cpu-freq", arg: argRequired, warn: "skein does not set CPU clocks"},
	{long: "distribution", short: 'm', arg: argRequired, warn: "srun places tasks in node order"},
	{long: "time-min", arg: argRequired, warn: "skein gives the job its --time"},
	{long: "switches", arg: argRequired, warn: "skein does not know the network's switches"},
	{long: "network", arg: argRequired, warn: "skein does not configure networks"},
	{long: "prefer", arg: argRequired, warn: "skein constraints are required (--constraint), never preferred"},
	{long: "oversubscribe", short: 's', arg: argNone, warn: "skein shares a node's CPUs and memory unless --exclusive, never a GPU"},
	{long: "spread-job", arg: argNone, warn: "use skein submit --spread"},
	{long: "use-min-nodes", arg: argNone, warn: "a skein job gets the nodes it asks for"},
	{long: "delay-boot", arg: argRequired, warn: "skein does not reboot nodes"},
	{long: "gres-flags", arg: argRequired, warn: "skein places GPUs per node"},
	{long: "mcs-label", arg: argRequired, warn: "skein has no MCS labels"},
	{long: "power", arg: argRequired, warn: "skein has no power plugins"},
	{long: "resv-ports", arg: argOptional, warn: "skein gives a gang its MASTER_PORT"},
	{long: "ignore-pbs", arg: argNone, warn: "skein reads no #PBS lines"},
	{long: "quiet", short: 'Q', arg: argNone, warn: "skein sbatch says little already"},
	{long: "verbose", short: 'v', arg: argNone, warn: "skein sbatch has no verbose output"},

	{long: "reservation", arg: argRequired, refused: "skein has no reservations"},
	{long: "licenses", short: 'L', arg: argRequired, refused: "skein has no licenses"},
	{long: "input", short: 'i', arg: argRequired, refused: "a skein job's stdin is /dev/null"},
	{long: "ntasks-per-core", arg: argRequired, refused: "skein places tasks by node only: use --ntasks-per-node"},
	{long: "ntasks-per-socket", arg: argRequired, refused: "skein places tasks by node only: use --ntasks-per-node"},
	{long: "ntasks-per-gpu", arg: argRequired, refused: "skein places tasks by node only: use --ntasks-per-node"},
	{long: "gpus-per-socket", arg: argRequired, refused: "skein places GPUs per node"},
	{long: "sockets-per-node", arg: argRequired, refused: "skein asks for CPUs, not sockets"},
	{long: "cores-per-socket", arg: argRequired, refused: "skein asks for CPUs, not cores"},
	{long: "threads-per-core", arg: argRequired, refused: "skein asks for CPUs, not threads"},
	{long: "thread-spec", arg: argRequired, refused: "skein does not reserve threads"},
	{long: "tmp", arg: argRequired, refused: "skein does not reserve disk"},
	{long: "core-spec", short: 'S', arg: argRequired, refused: "skein does not reserve cores"},
	{long: "cluster", short: 'M', arg: argRequired, refused: "skein is one cluster"},
	{long: "clusters", arg: argRequired, refused: "skein is one cluster"},
	{long: "container", arg: argRequired, refused: "use skein submit --image"},
	{long: "no-kill", short: 'k', arg: argOptional, refused: "a skein job stops when a node is lost, and restarts if it may"},
	{long: "overcommit", short: 'O', arg: argNone, refused: "skein does not overcommit"},
	{long: "export-file", arg: argRequired, refused: "use --export VAR=value"},
	{long: "nodefile", short: 'F', arg: argRequired, refused: "use --nodelist"},
	{long: "uid", arg: argRequired, refused: "a skein job runs as its owner"},
	{long: "gid", arg: argRequired, refused: "a skein job runs as its owner"},
	{long: "burst-buffer", arg: argRequired, refused: "skein has no burst buffers"},
	{long: "bb", arg: argRequired, refused: "skein has no burst buffers"},
	{long: "bbf", arg: argRequired, refused: "skein has no burst buffers"},
	{long: "reboot", arg: argNone, refused: "skein does not reboot nodes"},
	{long: "test-only", arg: argNone, refused: "skein does not estimate start times before a submit"},
	{long: "tres-per-task", arg: argRequired, refused: "use --gpus-per-task and --cpus-per-task"},
	{long: "extra-node-info", short: 'B', arg: argRequired, refused: "skein asks for CPUs, not sockets and cores"},
	{long: "x11", arg: argOptional, refused: "skein jobs have no X11 forwarding"},
	{long: "segment", arg: argRequired, refused: "skein does not know the network's segments"},
}

// Option is an sbatch option as skein takes it.
type Option struct {
	Long  string // "job-name"
	Short string // "J"; empty for an option without one
	// Refused says why skein refuses the option; Warning why it accepts
	// it with a warning and no effect. Both are empty for one that skein
	// carries out.
	Refused string
	Warning string
	// CommandLine is set on skein's own options (--wrap,
	// --ignore-unknown), which a script's directives cannot give.
	CommandLine bool
}

// Options lists the sbatch options skein knows: those it carries out,
// then those it accepts with a warning, then those it refuses. Any other option is refused as unknown.
func Options() []Option {
	out := make([]Option, 0, len(options))
	for _, o := range options {
		opt := Option{Long: o.long, Refused: o.refused, Warning: o.warn, CommandLine: o.cmdline}
		if o.short != 0 {
			opt.Short = string(o.short)
		}
		out = append(out, opt)
	}
	return out
}

// ignoreUnknown is skein's own option that turns refusals of unsupported
// options into warnings.
const ignoreUnknown = "ignore-unknown"

// setting is one option given, with its value.
type setting struct {
	opt   *option // nil: unknown
	value string
	text  string // the words as written: "-t 1:00:00", "--time=1:00:00"
	where string
}

func (s setting) String() string { return s.where + ": " + s.text }

func lookupLong(name string) *option {
	for _, o := range options {
		if o.long == name {
			return o
		}
	}
	return nil
}

func lookupShort(c byte) *option {
	for _, o := range options {
		if o.short == c {
			return o
		}
	}
	return nil
}

// parseOptions reads the options at the start of words. On the command
// line it stops at the first word that is not an option (the script) or
// after "--", and returns the index of that word; in a directive every
// word must be an option.
func parseOptions(words []word, cmdline bool) ([]setting, int, error) {
	var out []setting
	i := 0
	for i < len(words) {
		w := words[i]
		if cmdline && w.text == "--" {
			return out, i + 1, nil
		}
		if !strings.HasPrefix(w.text, "-") || w.text == "-" {
			if cmdline {
				return out, i, nil
			}
			return nil, 0, fmt.Errorf("%s: %s %s: %q is not an option: want -X VALUE or --NAME=VALUE", w.where, directivePrefix, joinWords(words), w.text)
		}
		s, used, err := parseOne(words[i:])
		if err != nil {
			return nil, 0, err
		}
		out = append(out, s)
		i += used
	}
	return out, i, nil
}

// parseOne reads one option from the start of words and says how many
// words it used.
func parseOne(words []word) (setting, int, error) {
	w := words[0]
	s := setting{where: w.where, text: w.text}
	var opt *option
	var value string
	hasValue := false
	if long, ok := strings.CutPrefix(w.text, "--"); ok {
		name, v, eq := strings.Cut(long, "=")
		value, hasValue = v, eq
		opt = lookupLong(name)
	} else {
		opt = lookupShort(w.text[1])
		if len(w.text) > 2 {
			value, hasValue = w.text[2:], true
			if value[0] == '=' {
				value = value[1:]
			}
		}
	}
	s.opt = opt
	used := 1
	kind := argOptional // an unknown option takes a value only with =
	if opt != nil {
		kind = opt.arg
	}
	switch {
	case kind == argRequired && !hasValue:
		if len(words) < 2 {
			return s, 0, fmt.Errorf("%s: %s: %w: the option needs a value", w.where, w.text, ErrBadValue)
		}
		value = words[1].text
		s.text += " " + value
		used = 2
	case kind == argNone && hasValue:
		return s, 0, fmt.Errorf("%s: %s: %w: the option takes no value", w.where, w.text, ErrBadValue)
	}
	s.value = value
	return s, used, nil
}

func joinWords(words []word) string {
	t := make([]string, len(words))
	for i, w := range words {
		t[i] = w.text
	}
	return strings.Join(t, " ")
}
