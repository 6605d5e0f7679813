package cli

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

// squeueFormat is Slurm's default squeue format.
const squeueFormat = "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R"

// helpOnlyFlag is --help without -h, for the commands whose -h is
// --noheader.
func helpOnlyFlag() ucli.Flag { return &ucli.BoolFlag{Name: "help", Usage: "show help"} }

// noHeaderFlag is Slurm's -h, --noheader. urfave reads any boolean
// flag h as --help, so slurmArgs turns these commands' -h into
// --noheader before urfave parses it.
func noHeaderFlag() ucli.Flag {
	return &ucli.BoolFlag{Name: "noheader", Usage: "print no header (-h)"}
}

// squeueRow is one job as squeue renders it.
type squeueRow struct {
	job   *structs.Job
	state slurmState
	nodes []string // where it runs, while it runs
	now   time.Time
	// idText, on the row of an array's folded pending tasks, is their
	// ID: 120_[3-9].
	idText string
}

// squeueFields are the `%` fields squeue -o supports, named as Slurm's.
var squeueFields = map[byte]formatField[squeueRow]{
	'i': {"JOBID", func(r squeueRow) string { return cmp.Or(r.idText, r.job.SlurmID()) }},
	'j': {"NAME", func(r squeueRow) string { return jobName(r.job) }},
	'u': {"USER", func(r squeueRow) string { return r.job.Owner }},
	't': {"ST", func(r squeueRow) string { return r.state.code }},
	'T': {"STATE", func(r squeueRow) string { return r.state.name }},
	'M': {"TIME", func(r squeueRow) string { return slurmDuration(elapsed(r.job, r.now)) }},
	'l': {"TIME_LIMIT", func(r squeueRow) string { return slurmTimeLimit(r.job.Spec.TimeLimit) }},
	'L': {"TIME_LEFT", squeueTimeLeft},
	'D': {"NODES", func(r squeueRow) string { return strconv.Itoa(jobNodes(r.job)) }},
	'C': {"CPUS", func(r squeueRow) string { return strconv.Itoa(jobNodes(r.job) * max(r.job.Spec.CPUs, 1)) }},
	'b': {"TRES_PER_NODE", func(r squeueRow) string { return gresOf(r.job.Spec) }},
	'P': {"PARTITION", func(r squeueRow) string { return jobPartition(r.job) }},
	'N': {"NODELIST", func(r squeueRow) string { return structs.HostList(r.nodes) }},
	'r': {"REASON", squeueReason},
	'R': {"NODELIST(REASON)", func(r squeueRow) string {
		if r.state == statePending {
			return "(" + squeueReason(r) + ")"
		}
		return structs.HostList(r.nodes)
	}},
	'Q': {"PRIORITY", func(r squeueRow) string { return strconv.Itoa(r.job.Spec.Priority) }},
	'V': {"SUBMIT_TIME", func(r squeueRow) string { return slurmTimestamp(r.job.SubmittedAt) }},
	'S': {"START_TIME", func(r squeueRow) string { return slurmTimestamp(r.job.StartedAt) }},
	'm': {"MIN_MEMORY", func(r squeueRow) string { return memoryField(int64(r.job.Spec.MemoryMiB)) }},
}

// squeueReason is why a job is in its state as Slurm's reason code
// (Resources, Priority, Dependency, JobHeldUser, ...: slurmReason); a job
// that does not wait has None. skein job says it in words.
func squeueReason(r squeueRow) string {
	if r.state != statePending {
		return reasonCodeNone
	}
	return slurmReason(r.job, r.now)
}

// squeueTimeLeft is the time a running job has left before its limit.
func squeueTimeLeft(r squeueRow) string {
	if r.job.Spec.TimeLimit == 0 {
		return "UNLIMITED"
	}
	return slurmDuration(time.Duration(r.job.Spec.TimeLimit) - elapsed(r.job, r.now))
}

// memoryField renders MiB as Slurm's memory sizes: 512M, 16G; 0 is 0.
func memoryField(mib int64) string {
	if mib != 0 && mib%1024 == 0 {
		return fmt.Sprintf("%dG", mib/1024)
	}
	return fmt.Sprintf("%dM", mib)
}

func squeueCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "squeue",
		Usage: "list jobs as Slurm's squeue does",
		Description: "Prints Slurm's default columns, JOBID PARTITION NAME USER ST TIME NODES NODELIST(REASON), of the\n" +
			"jobs still going (pending, running, completing, preempted), or of those -t and -j select.\n" +
			"States: PD pending (queued), R running, CG completing (cancelled, stopping), PR preempted\n" +
			"(stopping to queue again), CD completed (succeeded), F failed, CA cancelled, TO timeout.\n" +
			"-o fields: %i %j %u %t %T %M %l %L %D %C %b %P %N %r %R %Q %V %S %m, as %[.][WIDTH]LETTER.",
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "user", Aliases: []string{"u"}, Usage: "only the jobs of these `USERS` (comma-separated)"},
			&ucli.BoolFlag{Name: "me", Usage: "only the jobs of your token's user"},
			&ucli.StringFlag{Name: "states", Aliases: []string{"t"}, Usage: "only jobs in these `STATES` (comma-separated names or codes, or all)"},
			&ucli.StringFlag{Name: "jobs", Aliases: []string{"j"}, Usage: "only these job `IDS` (comma-separated prefixes; an array's ID is all its tasks), in any state"},
			&ucli.StringFlag{Name: "format", Aliases: []string{"o"}, Usage: "print the `FORMAT` of % fields (see the description)"},
			&ucli.StringFlag{Name: "Format", Aliases: []string{"O"}, Usage: "print these `FIELDS` (jobid,name:30,state,...; see the description)"},
			&ucli.StringFlag{Name: "partition", Aliases: []string{"p"}, Usage: "only the jobs of these `PARTITIONS` (comma-separated)"},
			&ucli.StringFlag{Name: "name", Aliases: []string{"n"}, Usage: "only the jobs with these `NAMES` (comma-separated)"},
			&ucli.BoolFlag{Name: "long", Aliases: []string{"l"}, Usage: "Slurm's long format, with the time limit, after the time"},
			&ucli.StringFlag{Name: "sort", Aliases: []string{"S"}, Usage: "sort by these `KEYS` (% letters, comma-separated; -KEY descending; default: submission order)"},
			&ucli.BoolFlag{Name: "start", Usage: "the pending jobs, with when they start (Unknown: skein does not estimate start times)"},
			&ucli.BoolFlag{Name: "array", Aliases: []string{"r"}, Usage: "one line per array task (by default an array's pending tasks are one line, ID_[INDEXES])"},
			&ucli.BoolFlag{Name: "all", Aliases: []string{"a"}, Usage: "accepted: skein shows every partition's jobs"},
			noHeaderFlag(),
			&ucli.BoolFlag{Name: "json", Usage: "print JSON"},
			helpOnlyFlag(),
		},
		HideHelp: true, // its -h is --noheader
		Action:   squeueAction,
	}
}

// squeueJob is one job in squeue --json.
type squeueJob struct {
	JobID     string    `json:"job_id"`
	Name      string    `json:"name"`
	User      string    `json:"user"`
	Partition string    `json:"partition"`
	State     string    `json:"state"`
	StateCode string    `json:"state_code"`
	Reason    string    `json:"reason,omitempty"`
	Nodes     int       `json:"nodes"`
	NodeList  []string  `json:"node_list"`
	GPUs      int       `json:"gpus_per_node"`
	Elapsed   int64     `json:"elapsed_seconds"`
	TimeLimit int64     `json:"time_limit_seconds"`
	Submitted time.Time `json:"submit_time"`
	Started   time.Time `json:"start_time,omitzero"`
}

func squeueAction(c *ucli.Context) error {
	_, cl, err := commandClient(c)
	if err != nil {
		return err
	}
	users := splitList(c.String("user"))
	if c.Bool("me") && len(users) > 0 {
		return usagef(c, "--me and -u: give one")
	}
	for _, u := range users {
		if err := checkFlag(c, "user", structs.ValidateUserName(u)); err != nil {
			return err
		}
	}
	var states []slurmState
	if c.IsSet("states") {
		if states, err = parseSlurmStates(c.String("states")); err != nil {
			return usagef(c, "-t: %v", err)
		}
	}
	ids := splitList(c.String("jobs"))
	partitions, names := splitList(c.String("partition")), splitList(c.String("name"))
	format := squeueFormat
	switch {
	case c.IsSet("format"):
		format = c.String("format")
	case c.IsSet("Format"):
		if format, err = squeueFormatOf(c.String("Format")); err != nil {
			return usagef(c, "-O: %v", err)
		}
	case c.Bool("start"):
		format = squeueStartFormat
	case c.Bool("long"):
		format = squeueLongFormat
	}
	var sorter func(a, b squeueRow) int
	if c.IsSet("sort") {
		if sorter, err = squeueSorter(c.String("sort")); err != nil {
			return usagef(c, "-S: %v", err)
		}
	}
	items, err := parseFormat(format, squeueFields)
	if err != nil {
		return usagef(c, "-o: %v", err)
	}

	jq := api.JobsQuery{Mine: c.Bool("me"), All: len(ids) > 0 || slices.ContainsFunc(states, func(s slurmState) bool { return !s.active() })}
	if len(users) == 1 {
		jq.Owner = users[0]
	}
	jobs, err := cl.JobsAll(c.Context, jq)
	if err != nil {
		return err
	}
	named := idMatcher(jobs, ids)
	var picked []structs.Job
	for _, j := range jobs {
		s := stateOf(&j)
		switch {
		case len(users) > 0 && !slices.Contains(users, j.Owner):
		case states != nil && !slices.Contains(states, s):
		case states == nil && len(ids) == 0 && !s.active():
		case len(ids) > 0 && !named(&j):
		case len(partitions) > 0 && !slices.Contains(partitions, jobPartition(&j)):
		case len(names) > 0 && !slices.Contains(names, jobName(&j)):
		case c.Bool("start") && s != statePending:
		default:
			picked = append(picked, j)
		}
	}
	for _, id := range ids {
		if one := idMatcher(jobs, []string{id}); !slices.ContainsFunc(jobs, func(j structs.Job) bool { return one(&j) }) {
			return fmt.Errorf("-j %s: no such job", id)
		}
	}
	nodes, err := runningNodes(c.Context, cl, picked)
	if err != nil {
		return err
	}
	now := timeNow()
	rows := make([]squeueRow, len(picked))
	for i := range picked {
		rows[i] = squeueRow{job: &picked[i], state: stateOf(&picked[i]), nodes: nodes[picked[i].ID], now: now}
	}
	if sorter != nil {
		slices.SortStableFunc(rows, sorter)
	}
	if !c.Bool("array") && !c.Bool("json") {
		rows = foldArrays(rows)
	}
	if c.Bool("json") {
		out := make([]squeueJob, len(rows))
		for i, r := range rows {
			out[i] = squeueJob{
				JobID: r.job.ID, Name: r.job.Spec.Name, User: r.job.Owner, Partition: jobPartition(r.job),
				State: r.state.name, StateCode: r.state.code, Reason: r.job.Reason,
				Nodes: jobNodes(r.job), NodeList: append([]string{}, r.nodes...), GPUs: r.job.Spec.GPUs,
				Elapsed: int64(elapsed(r.job, now) / time.Second), TimeLimit: int64(time.Duration(r.job.Spec.TimeLimit) / time.Second),
				Submitted: r.job.SubmittedAt, Started: r.job.StartedAt,
			}
		}
		return printJSON(c.App.Writer, out)
	}
	var b strings.Builder
	if c.Bool("long") && !c.Bool("noheader") {
		b.WriteString(now.Format("Mon Jan 2 15:04:05 2006") + "\n") // as squeue -l starts
	}
	if !c.Bool("noheader") {
		b.WriteString(renderFormat(items, squeueRow{}, true) + "\n")
	}
	for _, r := range rows {
		b.WriteString(renderFormat(items, r, false) + "\n")
	}
	_, err = fmt.Fprint(c.App.Writer, b.String())
	return err
}
