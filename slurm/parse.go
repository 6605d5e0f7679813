package slurm

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/skein-dev/skein/structs"
)

// requeueRestarts is the --restarts a --requeue job gets: as many requeues
// as Slurm allows a batch job by default (MaxBatchRequeue).
const requeueRestarts = 5

// Input is what `skein sbatch` was given.
type Input struct {
	// Path is the script's path as given, for errors and the default job
	// name; empty with --wrap.
	Path string
	// Script is the script's content (unused with --wrap).
	Script []byte
	// Options are the sbatch options from the command line, which
	// override the script's directives; Args are the script's arguments.
	Options []string
	Args    []string
	// SubmitDir is the directory sbatch runs in: the job's default
	// working directory, and relative -D paths start there. SubmitHost is
	// the machine's name (SLURM_SUBMIT_HOST).
	SubmitDir  string
	SubmitHost string
	// LookupEnv reads the submitter's environment, for --export=VAR, and
	// Environ lists it, for --export=ALL (nil: an empty one).
	LookupEnv func(string) (string, bool)
	Environ   func() []string
	// Now is the time of the submission, from which --begin and
	// --deadline's relative times count (zero: the clock's).
	Now time.Time
}

// Batch is a script turned into a job.
type Batch struct {
	Spec structs.JobSpec `json:"spec"`
	// Interpreter is what the #! line names: the job runs the script with it.
	Interpreter []string `json:"interpreter"`
	// Output and Error are the -o and -e patterns rank 0 copies stdout and
	// stderr into (Error "": stderr goes to Output too), relative to the
	// job's working directory; Append is --open-mode=append.
	Output string `json:"output"`
	Error  string `json:"error,omitempty"`
	Append bool   `json:"append,omitempty"`
	// Warnings are what was given but has no full effect in skein.
	Warnings []string `json:"warnings,omitempty"`
	// Parsable and Wait are sbatch's --parsable and --wait.
	Parsable bool `json:"parsable,omitempty"`
	Wait     bool `json:"wait,omitempty"`
	// TasksPerNode, above 1, is the job's tasks per node (-n,
	// --ntasks-per-node): the script runs once per node all the same, and
	// srun starts this many copies of its command there unless told
	// otherwise. The script sees it as SLURM_NTASKS_PER_NODE.
	TasksPerNode int `json:"tasks_per_node,omitempty"`
}

// MaxTasksPerNode bounds --ntasks-per-node.
const MaxTasksPerNode = 1024

// onCommandLine is where an option given on the command line was given.
const onCommandLine = "command line"

// defaultOutput is where rank 0 writes the script's output when no -o
// says, as in sbatch.
const defaultOutput = "slurm-%j.out"

// SplitArgs splits `skein sbatch`'s arguments into sbatch's options, the
// script and the script's arguments: the script is the first word that is
// neither an option nor an option's value. With --wrap there is no script
// and every argument is an option.
func SplitArgs(args []string) (opts []string, script string, scriptArgs []string, err error) {
	words := make([]word, len(args))
	for i, a := range args {
		words[i] = word{text: a, where: onCommandLine}
	}
	settings, n, err := parseOptions(words, true)
	if err != nil {
		return nil, "", nil, err
	}
	opts = args[:n]
	if n > 0 && args[n-1] == "--" {
		opts = args[:n-1]
	}
	for _, s := range settings {
		if s.opt != nil && s.opt.long == "wrap" {
			if n < len(args) {
				return nil, "", nil, fmt.Errorf("%w: --wrap runs its command as the script: give no script (%q)", ErrUsage, args[n])
			}
			return opts, "", nil, nil
		}
	}
	if n == len(args) {
		return nil, "", nil, fmt.Errorf("%w: missing the batch script: skein sbatch [OPTIONS] SCRIPT [ARGS...]", ErrUsage)
	}
	return opts, args[n], args[n+1:], nil
}

// Parse reads the script's directives and the command line's options, the
// latter winning, and returns the job. Options skein does not support are
// refused, all of them listed in one error (ErrUnsupported), unless the
// command line has --ignore-unknown: they are then left out with a warning.
func Parse(in Input) (*Batch, error) {
	cmdWords := make([]word, len(in.Options))
	for i, a := range in.Options {
		cmdWords[i] = word{text: a, where: onCommandLine}
	}
	cmdSettings, _, err := parseOptions(cmdWords, false)
	if err != nil {
		return nil, err
	}
	ignore := false
	wrap, hasWrap := "", false
	for _, s := range cmdSettings {
		if s.opt != nil && s.opt.long == ignoreUnknown {
			ignore = true
		}
		if s.opt != nil && s.opt.long == "wrap" {
			wrap, hasWrap = s.value, true
		}
	}
	script, name, place := in.Script, filepath.Base(in.Path), in.Path
	if hasWrap {
		// As sbatch does: a sh script around the command.
		script, name, place = []byte("#!/bin/sh\n# This script was made by skein sbatch --wrap.\n\n"+wrap+"\n"), "wrap", "--wrap"
	}
	if len(script) > MaxScriptBytes {
		return nil, fmt.Errorf("%s: %w: %d bytes, more than the limit of %d", place, ErrTooLarge, len(script), MaxScriptBytes)
	}
	interp, lines, err := scriptDirectives(script, place)
	if err != nil {
		return nil, err
	}
	var all []setting
	for _, ws := range lines {
		ss, _, err := parseOptions(ws, false)
		if err != nil {
			return nil, err
		}
		all = append(all, ss...)
	}
	all = append(all, cmdSettings...)

	b := &builder{in: in, batch: &Batch{Interpreter: interp, Output: defaultOutput}, at: map[string]string{}}
	b.batch.Spec.Name = name
	var refused []string
	for _, s := range all {
		switch {
		case s.opt == nil:
			refused = append(refused, s.String()+": unknown option")
		case s.opt.refused != "":
			refused = append(refused, s.String()+": "+s.opt.refused)
		case s.opt.cmdline && s.where != onCommandLine:
			refused = append(refused, s.String()+": only on skein sbatch's command line")
		}
	}
	if len(refused) > 0 && !ignore {
		return nil, fmt.Errorf("%w (nothing was submitted; --%s submits without them):\n  %s",
			ErrUnsupported, ignoreUnknown, strings.Join(refused, "\n  "))
	}
	for _, r := range refused {
		b.warnf("left out: %s", r)
	}
	for _, s := range all {
		if s.opt != nil && s.opt.warn != "" {
			b.warnf("%s: accepted, no effect: %s", s, s.opt.warn)
		}
	}
	for _, s := range lastOfEachGroup(all) {
		b.at[s.opt.key()] = s.String()
		if s.opt.apply == nil {
			continue
		}
		if err := s.opt.apply(b, s.value); err != nil {
			return nil, fmt.Errorf("%s: %w", s, err)
		}
	}
	if err := b.finish(); err != nil {
		return nil, err
	}
	if b.batch.Spec.Command, err = command(b.batch, script, in.Args); err != nil {
		return nil, err
	}
	return b.batch, nil
}

// lastOfEachGroup keeps, of the supported settings, the last of each
// group, in the order given.
func lastOfEachGroup(all []setting) []setting {
	last := map[string]int{}
	for i, s := range all {
		if s.opt != nil && s.opt.refused == "" {
			last[s.opt.key()] = i
		}
	}
	var out []setting
	for i, s := range all {
		if s.opt != nil && s.opt.refused == "" && last[s.opt.key()] == i {
			out = append(out, s)
		}
	}
	return out
}

// builder collects what the settings ask for; finish turns the settings
// that depend on one another into the spec.
type builder struct {
	in    Input
	batch *Batch
	// ntasks and perNode are -n and --ntasks-per-node (0: not given).
	ntasks, perNode int
	// gpusTotal is -G; memPerCPU and memPerGPU the per-unit memory asks.
	gpusTotal            int
	memPerCPU, memPerGPU structs.SizeMiB
	// gpusPerTasks is --gpus-per-task, cpusPerGPUs --cpus-per-gpu and
	// minCPUsPerNode --mincpus (0: not given).
	gpusPerTasks, cpusPerGPUs, minCPUsPerNode int
	// wholeMemory is --mem=0: all of each node's memory.
	wholeMemory bool
	env         map[string]string
	// exported is what --export=ALL passes of the submitter's
	// environment, the job's secret env.
	exported map[string]string
	// at says where the setting of each group was given, for finish's errors.
	at map[string]string
}

// badAt is a bad value found in finish, given at the setting of group key
// (the script's or the command line's line) and, when set, of other.
func (b *builder) badAt(key, other, format string, args ...any) error {
	where := b.at[key]
	if w, ok := b.at[other]; ok && other != "" {
		where += " with " + w
	}
	return fmt.Errorf("%s: %w", where, badValue(format, args...))
}

func (b *builder) warnf(format string, args ...any) {
	b.batch.Warnings = append(b.batch.Warnings, fmt.Sprintf(format, args...))
}

func (b *builder) setEnv(k, v string) {
	if b.env == nil {
		b.env = map[string]string{}
	}
	b.env[k] = v
}

func badValue(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadValue, fmt.Sprintf(format, args...))
}

// count parses a whole number in lo..hi.
func count(v string, lo, hi int) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, badValue("%q is not a whole number", v)
	}
	if n < lo || n > hi {
		return 0, badValue("%d is out of range %d..%d", n, lo, hi)
	}
	return n, nil
}

func (b *builder) jobName(v string) error {
	if v == "" || len(v) > structs.MaxNameLen {
		return badValue("want a name of 1..%d characters", structs.MaxNameLen)
	}
	b.batch.Spec.Name = v
	return nil
}

// nodes reads N, or the range N-N: skein places exactly N nodes.
func (b *builder) nodes(v string) error {
	lo, hi, isRange := strings.Cut(v, "-")
	n, err := count(lo, 1, structs.MaxNodes)
	if err != nil {
		return err
	}
	if isRange {
		m, err := count(hi, 1, structs.MaxNodes)
		if err != nil {
			return err
		}
		if m != n {
			return badValue("a range of node counts: skein places exactly N nodes; give one number")
		}
	}
	b.batch.Spec.Nodes = n
	return nil
}

func (b *builder) setNtasks(v string) (err error) {
	b.ntasks, err = count(v, 1, structs.MaxNodes)
	return err
}

// ntasksPerNode reads --ntasks-per-node: the script still runs once per
// node, and srun starts that many tasks on each (srun.go).
func (b *builder) ntasksPerNode(v string) (err error) {
	b.perNode, err = count(v, 1, MaxTasksPerNode)
	return err
}

// gpuCount reads "[TYPE:]N" (N defaults to 1 when only TYPE is given,
// with TYPE a name that is not a number).
func gpuCount(v string, hi int) (model string, n int, err error) {
	typ, num, hasType := strings.Cut(v, ":")
	if !hasType {
		if _, err := strconv.Atoi(v); err != nil {
			return v, 1, nil
		}
		num = v
		typ = ""
	}
	if strings.Contains(num, ":") || hasType && typ == "" {
		return "", 0, badValue("%q: want [TYPE:]COUNT, like a100:4 or 4", v)
	}
	n, err = count(num, 0, hi)
	return typ, n, err
}

// gres reads gpu[:TYPE][:N], or a list of them; only GPUs are resources
// skein schedules.
func (b *builder) gres(v string) error {
	if v == "none" {
		return nil
	}
	var gpus []string
	for _, g := range strings.Split(v, ",") {
		name, rest, _ := strings.Cut(g, ":")
		if name != "gpu" {
			return badValue("generic resource %q: skein schedules GPUs only (gpu[:TYPE][:COUNT])", name)
		}
		gpus = append(gpus, rest)
	}
	if len(gpus) > 1 {
		return badValue("%d GPU requests: skein asks for one GPU type per job", len(gpus))
	}
	spec := &b.batch.Spec
	spec.GPUs = 1
	if gpus[0] == "" {
		return nil
	}
	var err error
	spec.GPUModel, spec.GPUs, err = gpuCount(gpus[0], structs.MaxGPUsPerNode)
	return err
}

func (b *builder) gpusPerNode(v string) (err error) {
	b.batch.Spec.GPUModel, b.batch.Spec.GPUs, err = gpuCount(v, structs.MaxGPUsPerNode)
	return err
}

func (b *builder) gpusPerTask(v string) (err error) {
	b.batch.Spec.GPUModel, b.gpusPerTasks, err = gpuCount(v, structs.MaxGPUsPerNode)
	return err
}

func (b *builder) setGPUsTotal(v string) (err error) {
	b.batch.Spec.GPUModel, b.gpusTotal, err = gpuCount(v, structs.MaxGPUsPerNode*structs.MaxNodes)
	return err
}

func (b *builder) cpusPerTask(v string) (err error) {
	b.batch.Spec.CPUs, err = count(v, 1, structs.MaxCPUs)
	if err == nil {
		b.setEnv("SLURM_CPUS_PER_TASK", v)
	}
	return err
}

// size reads a Slurm memory size: a number of MiB, or with a K, M, G or
// T suffix.
func size(v string) (structs.SizeMiB, error) {
	m, err := structs.ParseSizeMiB(v)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrBadValue, err)
	}
	return m, nil
}

func (b *builder) mem(v string) (err error) {
	b.batch.Spec.MemoryMiB, err = size(v)
	b.wholeMemory = err == nil && b.batch.Spec.MemoryMiB == 0
	return err
}

func (b *builder) setMemPerCPU(v string) (err error) {
	b.memPerCPU, err = size(v)
	return err
}

func (b *builder) setMemPerGPU(v string) (err error) {
	b.memPerGPU, err = size(v)
	return err
}

func (b *builder) time(v string) error {
	d, err := ParseTime(v)
	b.batch.Spec.TimeLimit = d
	return err
}

func (b *builder) signal(v string) error {
	sig, err := ParseSignal(v)
	b.batch.Spec.Signal = sig
	return err
}

// array reads START-END[%MAX] or one index N[%MAX]; lists and steps are
// not skein arrays.
func (b *builder) array(v string) error {
	rng, maxRun, capped := strings.Cut(v, "%")
	if strings.ContainsAny(rng, ",:") {
		return badValue("%q: skein arrays are one range START-END[%%MAX]; lists and steps (1,3,5 or 0-15:2) are not supported", v)
	}
	if !strings.Contains(rng, "-") {
		rng += "-" + rng
	}
	if capped {
		rng += "%" + maxRun
	}
	a, err := structs.ParseArraySpec(rng)
	if err != nil {
		return badValue("%q: want START-END[%%MAX], like 0-99%%8", v)
	}
	if a.Start < 0 || a.End < a.Start || a.Len() > structs.MaxArrayTasks || a.MaxRunning < 0 {
		return badValue("%q: want 0 <= START <= END, at most %d tasks, MAX not negative", v, structs.MaxArrayTasks)
	}
	b.batch.Spec.Array = a
	return nil
}

// dependencyKinds are the dependency types skein has that name jobs;
// singleton names none.
var dependencyKinds = map[string]string{
	"afterok": structs.AfterOK, "afterany": structs.AfterAny, "afternotok": structs.AfterNotOK,
}

// dependency reads TYPE:ID[:ID...][,TYPE:ID...] and singleton: every one
// must hold.
func (b *builder) dependency(v string) error {
	if strings.Contains(v, "?") {
		return badValue("%q: skein waits for all dependencies; ? (any of them) is not supported", v)
	}
	var deps []structs.Dependency
	singleton := false
	for _, part := range strings.Split(v, ",") {
		kind, ids, _ := strings.Cut(part, ":")
		if kind == "singleton" {
			if ids != "" {
				return badValue("%q: singleton names no job (it waits for the jobs of the same name and user)", part)
			}
			singleton = true
			continue
		}
		cond, ok := dependencyKinds[kind]
		if !ok {
			return badValue("dependency type %q: skein supports afterok, afterany, afternotok and singleton (after and aftercorr are not supported)", kind)
		}
		if ids == "" {
			return badValue("%q: want %s:JOB_ID[:JOB_ID...]", part, kind)
		}
		for _, id := range strings.Split(ids, ":") {
			if id == "" || strings.Contains(id, "+") {
				return badValue("%q: want job IDs without +TIME", part)
			}
			// Slurm names an array's task ARRAY_INDEX: a numbered
			// array's as skein does (120_3), a skein ID's as ID-INDEX.
			base, index, ok := strings.Cut(id, "_")
			if _, _, numbered := structs.ParseJobNumber(id); ok && !numbered {
				n, err := strconv.Atoi(index)
				if err != nil || n < 0 || base == "" {
					return badValue("%q: an array task is ARRAY_INDEX, like 3f2a_7", id)
				}
				id = structs.ArrayTaskID(base, n)
			}
			deps = append(deps, structs.Dependency{JobID: id, Condition: cond})
		}
	}
	if len(deps) > structs.MaxDependencies {
		return badValue("%d dependencies, more than the limit of %d", len(deps), structs.MaxDependencies)
	}
	b.batch.Spec.After, b.batch.Spec.Singleton = deps, singleton
	return nil
}

func (b *builder) output(v string) error {
	if _, err := expandPattern(v, ""); err != nil {
		return err
	}
	b.batch.Output = v
	return nil
}

func (b *builder) errorFile(v string) error {
	if _, err := expandPattern(v, ""); err != nil {
		return err
	}
	b.batch.Error = v
	return nil
}

func (b *builder) openMode(v string) error {
	switch v {
	case "append", "a":
		b.batch.Append = true
	case "truncate", "t":
		b.batch.Append = false
	default:
		return badValue("%q: want append or truncate", v)
	}
	return nil
}

// constraint reads FEATURE[&FEATURE...]: each feature is a node label,
// NAME (label NAME=true) or NAME=VALUE.
func (b *builder) constraint(v string) error {
	if strings.ContainsAny(v, "|[]*!()") {
		return badValue("%q: skein constraints are labels that must all match (A&B); |, [], * and ! are not supported", v)
	}
	for _, f := range strings.Split(v, "&") {
		k, val, hasVal := strings.Cut(f, "=")
		if !hasVal {
			val = "true"
		}
		if k == "" || val == "" {
			return badValue("%q: empty feature in %q", f, v)
		}
		b.constrain(k, val)
	}
	return nil
}

func (b *builder) constrain(k, v string) {
	if b.batch.Spec.Constraints == nil {
		b.batch.Spec.Constraints = map[string]string{}
	}
	b.batch.Spec.Constraints[k] = v
}

// partition reads -p: the job runs on the nodes of that partition
// (started with `skein agent --partition NAME`).
func (b *builder) partition(v string) error {
	if strings.Contains(v, ",") {
		return badValue("%q: give one partition: a skein job waits in one partition's queue", v)
	}
	if err := structs.ValidatePartitionName(v); err != nil {
		return badValue("%v", err)
	}
	b.batch.Spec.Partition = v
	return nil
}

// exclusive reads --exclusive: the job's nodes run no other job. Slurm's
// =user, =mcs and =topo share nodes by rules skein has not.
func (b *builder) exclusive(v string) error {
	if v != "" {
		return badValue("%q: skein's --exclusive gives the job its nodes to itself; it has no sharing by user, MCS label or topology", v)
	}
	b.batch.Spec.Exclusive = true
	return nil
}

// account reads --account: the account the job's use is charged to, one
// the user is a member of (skein account).
func (b *builder) account(v string) error {
	if err := structs.ValidateAccountName("account", v); err != nil {
		return badValue("%s", err)
	}
	b.batch.Spec.Account = v
	b.setEnv("SLURM_JOB_ACCOUNT", v)
	return nil
}

// qos reads --qos: the job's quality of service (skein qos).
func (b *builder) qos(v string) error {
	if err := structs.ValidateAccountName("qos", v); err != nil {
		return badValue("%s", err)
	}
	b.batch.Spec.QoS = v
	b.setEnv("SLURM_JOB_QOS", v)
	return nil
}

func (b *builder) requeue(string) error {
	b.batch.Spec.Restarts = requeueRestarts
	b.warnf("--requeue: the job runs again up to %d times when its node is lost, and also when it fails", requeueRestarts)
	return nil
}

func (b *builder) noRequeue(string) error {
	b.batch.Spec.Restarts = 0
	return nil
}

// export reads ALL, NONE, or a list of VAR and VAR=VALUE, with or without
// ALL first: a skein job starts from its node's minimal environment
// whatever it says, and gets the variables named.
func (b *builder) export(v string) error {
	all := false
	for _, item := range strings.Split(v, ",") {
		all = all || item == "ALL"
		if item == "ALL" || item == "NONE" || item == "" {
			continue
		}
		k, val, hasVal := strings.Cut(item, "=")
		if !structs.ValidEnvName(k) {
			return badValue("%q: invalid variable name", k)
		}
		if structs.ReservedEnv(k) {
			return badValue("%s is set by skein and cannot be exported", k)
		}
		if !hasVal {
			var ok bool
			if b.in.LookupEnv != nil {
				val, ok = b.in.LookupEnv(k)
			}
			if !ok {
				b.warnf("--export: %s is not set in your environment; the job does not get it", k)
				continue
			}
		}
		b.setEnv(k, val)
	}
	if all {
		b.exportAll() // after the variables named, which it leaves to env
	}
	return nil
}

// exportAll takes the submitter's environment for the job, as Slurm's
// --export=ALL does, less what --export names (env has it), what is not
// the submitter's to pass on (notExported) and what looks like a secret
// (looksSecret), which a warning names: those reach the job only when
// --export names them.
func (b *builder) exportAll() {
	if b.in.Environ == nil {
		return
	}
	b.exported = map[string]string{}
	var secrets []string
	for _, kv := range b.in.Environ() {
		k, v, ok := strings.Cut(kv, "=")
		_, named := b.env[k]
		switch {
		case !ok || named || !structs.ValidEnvName(k) || strings.IndexByte(v, 0) >= 0 || notExported(k):
		case looksSecret(k):
			secrets = append(secrets, k)
		default:
			b.exported[k] = v
		}
	}
	if len(secrets) > 0 {
		slices.Sort(secrets)
		b.warnf("--export=ALL: left out what looks like a secret: %s; name a variable to pass it (--export=ALL,%s)",
			strings.Join(secrets, ", "), secrets[0])
	}
}

// notExportedNames and notExportedPrefixes are the variables
// --export=ALL never passes (notExported): the job's account's own (the
// job runs as its owner's account on its node), the submitter's session
// and host's, and Slurm's.
var (
	notExportedNames = []string{
		"HOME", "USER", "LOGNAME", "SHELL", "MAIL",
		"PWD", "OLDPWD", "SHLVL", "_", "HOSTNAME", "TMPDIR", "TERM", "TERMCAP", "COLUMNS", "LINES",
		"DISPLAY", "XAUTHORITY", "WINDOWID", "TMUX", "TMUX_PANE", "STY", "WINDOW",
		"DBUS_SESSION_BUS_ADDRESS", "KRB5CCNAME",
	}
	notExportedPrefixes = []string{"SSH_", "XDG_", "SLURM_", "SBATCH_", "SRUN_", "SALLOC_"}
)

// notExported reports whether --export=ALL leaves k out: one of the
// above, or a variable skein sets for the job itself.
func notExported(k string) bool {
	return slices.Contains(notExportedNames, k) || structs.ReservedEnv(k) ||
		slices.ContainsFunc(notExportedPrefixes, func(p string) bool { return strings.HasPrefix(k, p) })
}

// looksSecret reports whether a variable's name says it holds a secret:
// HF_TOKEN, AWS_SECRET_ACCESS_KEY, PGPASSWORD, OPENAI_API_KEY, MYSQL_PWD.
func looksSecret(k string) bool {
	k = strings.ToUpper(k)
	for _, part := range []string{"TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIAL", "PRIVATE"} {
		if strings.Contains(k, part) {
			return true
		}
	}
	for _, word := range strings.Split(k, "_") {
		switch word {
		case "KEY", "APIKEY", "PWD", "AUTH", "COOKIE":
			return true
		}
	}
	return false
}

func (b *builder) chdir(v string) error {
	if v == "" {
		return badValue("empty directory")
	}
	if !filepath.IsAbs(v) {
		v = filepath.Join(b.in.SubmitDir, v)
	}
	b.batch.Spec.Workdir = v
	return nil
}

func (b *builder) parsable(string) error {
	b.batch.Parsable = true
	return nil
}

func (b *builder) wait(string) error {
	b.batch.Wait = true
	return nil
}

// finish resolves what depends on more than one option: the node count
// against -n, -G per node, memory per CPU or GPU, and the defaults.
func (b *builder) finish() error {
	spec := &b.batch.Spec
	if spec.Nodes == 0 && len(spec.NodeList) > 0 {
		spec.Nodes = len(spec.NodeList)
	}
	if n := len(spec.NodeList); n > 0 && spec.Nodes != n {
		return b.badAt("nodes", "nodelist", "%d nodes with %d named: skein runs a job on exactly the nodes --nodelist names", spec.Nodes, n)
	}
	if spec.Nodes == 0 {
		spec.Nodes = 1
		switch {
		case b.ntasks > 1 && b.perNode > 0:
			spec.Nodes = max(b.ntasks/b.perNode, 1)
		case b.ntasks > 1:
			spec.Nodes = b.ntasks // one task per node
		}
	}
	perNode := max(b.perNode, 1)
	if b.perNode == 0 && b.ntasks > spec.Nodes && b.ntasks%spec.Nodes == 0 {
		perNode = b.ntasks / spec.Nodes
	}
	if b.ntasks != 0 && b.ntasks != spec.Nodes*perNode {
		return b.badAt("ntasks", "nodes", "%d tasks on %d nodes, %d per node: skein runs the same number of tasks on every node; give --ntasks equal to --nodes times --ntasks-per-node, or leave it out", b.ntasks, spec.Nodes, perNode)
	}
	if perNode > 1 {
		b.batch.TasksPerNode = perNode
	}
	if b.gpusPerTasks > 0 {
		spec.GPUs = b.gpusPerTasks * perNode
		if spec.GPUs > structs.MaxGPUsPerNode {
			return b.badAt("gpus", "ntasks-per-node", "%d GPUs per node, more than the limit of %d", spec.GPUs, structs.MaxGPUsPerNode)
		}
	}
	if b.gpusTotal > 0 {
		if b.gpusTotal%spec.Nodes != 0 {
			return b.badAt("gpus", "nodes", "%d GPUs on %d nodes: skein puts the same number of GPUs on each node; give a multiple of %d, or --gpus-per-node", b.gpusTotal, spec.Nodes, spec.Nodes)
		}
		spec.GPUs = b.gpusTotal / spec.Nodes
		if spec.GPUs > structs.MaxGPUsPerNode {
			return b.badAt("gpus", "nodes", "%d GPUs per node, more than the limit of %d", spec.GPUs, structs.MaxGPUsPerNode)
		}
	}
	if spec.GPUModel != "" && spec.GPUs == 0 {
		return b.badAt("gpus", "", "GPU type %s with 0 GPUs", spec.GPUModel)
	}
	if err := b.setCPUs(perNode); err != nil {
		return err
	}
	if !spec.Deadline.IsZero() && !spec.Begin.IsZero() && spec.Deadline.Before(spec.Begin) {
		return b.badAt("deadline", "begin", "the deadline %s is before the begin time %s", spec.Deadline.Format(time.RFC3339), spec.Begin.Format(time.RFC3339))
	}
	var mem structs.SizeMiB
	switch {
	case b.memPerCPU > 0:
		mem = b.memPerCPU * structs.SizeMiB(max(spec.CPUs, 1))
	case b.memPerGPU > 0:
		if spec.GPUs == 0 {
			return b.badAt("mem", "", "memory per GPU, but no GPUs asked for")
		}
		mem = b.memPerGPU * structs.SizeMiB(spec.GPUs)
	}
	if mem > structs.MaxMemoryMiB {
		return b.badAt("mem", "", "%d MiB per node, more than the limit of %d", mem, structs.MaxMemoryMiB)
	}
	if mem > 0 {
		spec.MemoryMiB = mem
	}
	if b.wholeMemory && mem == 0 {
		// All of each node's memory: no other job may hold any of it, so
		// the job has its nodes to itself, with no memory limit.
		if !spec.Exclusive {
			b.warnf("%s: all of each node's memory: the job has its nodes to itself (--exclusive), with no memory limit", b.at["mem"])
		}
		spec.Exclusive = true
	}
	if spec.Signal != nil {
		if spec.TimeLimit == 0 {
			return b.badAt("signal", "", "the signal is sent before the time limit, but no --time is given")
		}
		if spec.Signal.Before >= spec.TimeLimit {
			return b.badAt("signal", "time", "%s before the limit: must be less than the time limit %s", spec.Signal.Before, spec.TimeLimit)
		}
	}
	if spec.Workdir == "" {
		spec.Workdir = b.in.SubmitDir
	}
	b.setEnv("SLURM_SUBMIT_DIR", b.in.SubmitDir)
	if b.in.SubmitHost != "" {
		b.setEnv("SLURM_SUBMIT_HOST", b.in.SubmitHost)
	}
	spec.Env = b.env
	if len(b.exported) > 0 {
		spec.SecretEnv = b.exported // none of env's: exportAll left them out
	}
	return nil
}

// SplitAllocArgs splits salloc's arguments into sbatch's options and the
// command to run in the allocation (empty: none given), at the first
// word that is neither an option nor an option's value, or after "--".
func SplitAllocArgs(args []string) (opts, command []string, err error) {
	words := make([]word, len(args))
	for i, a := range args {
		words[i] = word{text: a, where: onCommandLine}
	}
	_, n, err := parseOptions(words, true)
	if err != nil {
		return nil, nil, err
	}
	opts = args[:n:n] // an append to opts must not write over command
	if n > 0 && args[n-1] == "--" {
		opts = args[: n-1 : n-1]
	}
	return opts, args[n:], nil
}
