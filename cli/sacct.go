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
	"github.com/skein-dev/skein/slurm"
	"github.com/skein-dev/skein/structs"
)

// sacctRow is one job as sacct renders it.
type sacctRow struct {
	job   *structs.Job
	state slurmState
	now   time.Time
	// nodes are where the job's last attempt ran; looked up only when
	// the NodeList column is asked for.
	nodes []string
}

// sacctField is a column of sacct: its name, default width, and value.
// Columns are right-aligned, as sacct's are, but for JobID.
type sacctField struct {
	name  string
	width int
	value func(sacctRow) string
}

// sacctFields are the columns sacct --format may name (in any case).
var sacctFields = []sacctField{
	{"JobID", 12, func(r sacctRow) string { return r.job.SlurmID() }},
	{"JobName", 10, func(r sacctRow) string { return jobName(r.job) }},
	{"User", 9, func(r sacctRow) string { return r.job.Owner }},
	{"Partition", 10, func(r sacctRow) string { return jobPartition(r.job) }},
	{"State", 10, func(r sacctRow) string { return r.state.name }},
	{"ExitCode", 8, func(r sacctRow) string { return exitCodeField(r.job) }},
	{"Elapsed", 10, func(r sacctRow) string { return slurmElapsed(elapsed(r.job, r.now)) }},
	{"Timelimit", 10, func(r sacctRow) string { return slurmTimeLimit(r.job.Spec.TimeLimit) }},
	{"Submit", 19, func(r sacctRow) string { return slurmTimestamp(r.job.SubmittedAt) }},
	{"Start", 19, func(r sacctRow) string { return slurmTimestamp(r.job.StartedAt) }},
	{"End", 19, func(r sacctRow) string { return slurmTimestamp(r.job.FinishedAt) }},
	{"NNodes", 8, func(r sacctRow) string { return strconv.Itoa(jobNodes(r.job)) }},
	{"AllocGPUS", 9, func(r sacctRow) string { return strconv.Itoa(jobNodes(r.job) * r.job.Spec.GPUs) }},
	{"AllocCPUS", 10, func(r sacctRow) string { return strconv.Itoa(jobNodes(r.job) * max(r.job.Spec.CPUs, 1)) }},
	{"Reason", 20, func(r sacctRow) string { return cmp.Or(r.job.Reason, "None") }},
	{"MaxRSS", 10, func(r sacctRow) string { return slurmMaxRSS(r.job.Usage) }},
	{"TotalCPU", 10, func(r sacctRow) string { return slurmTotalCPU(r.job.Usage) }},
	{"NodeList", 15, func(r sacctRow) string {
		if len(r.nodes) == 0 {
			return "None assigned"
		}
		return structs.HostList(r.nodes)
	}},
	{"AllocTRES", 30, func(r sacctRow) string { return allocTRES(r.job) }},
	{"ReqTRES", 30, func(r sacctRow) string { return allocTRES(r.job) }},
	{"Priority", 10, func(r sacctRow) string { return strconv.Itoa(r.job.Spec.Priority) }},
	{"WorkDir", 30, func(r sacctRow) string { return r.job.Spec.Workdir }},
}

// allocTRES is what the job holds, as Slurm's TRES: cpu, mem, node and
// gres/gpu, in all.
func allocTRES(j *structs.Job) string {
	n := jobNodes(j)
	s := fmt.Sprintf("billing=%d,cpu=%d", max(j.Spec.CPUs, 1)*n, max(j.Spec.CPUs, 1)*n)
	if g := j.Spec.GPUs; g > 0 {
		s += fmt.Sprintf(",gres/gpu=%d", g*n)
	}
	if m := int64(j.Spec.MemoryMiB); m > 0 {
		s += ",mem=" + memoryField(m*int64(n))
	}
	return s + ",node=" + strconv.Itoa(n)
}

// Slurm's other sacct column sets: -b (brief) and -l (long).
const (
	sacctBrief = "JobID,State,ExitCode"
	sacctLong  = "JobID,JobName,Partition,User,State,ExitCode,Elapsed,Timelimit,Submit,Start,End,NNodes,NodeList,AllocCPUS,AllocGPUS,AllocTRES,MaxRSS,TotalCPU,Reason"
)

// sacctDefault is the columns sacct prints without --format.
const sacctDefault = "JobID,JobName,State,ExitCode,Elapsed,Start,End,NNodes,AllocGPUS"

// exitCodeField renders a job's exit code as Slurm's EXIT:SIGNAL. skein
// records a death by signal N as 128+N, which reads 0:N; -1, no exit code
// reported, reads -1:0.
func exitCodeField(j *structs.Job) string {
	switch c := j.ExitCode; {
	case !j.State.Terminal() && j.StartedAt.IsZero():
		return "0:0"
	case c > 128 && c <= 128+64:
		return fmt.Sprintf("0:%d", c-128)
	default:
		return fmt.Sprintf("%d:0", c)
	}
}

func sacctCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "sacct",
		Usage: "list the history of jobs as Slurm's sacct does",
		Description: "Lists the jobs the cluster keeps (finished jobs stay for --job-retention) that ran or waited\n" +
			"between -S and -E: by default since midnight, or every one kept with -j. States are squeue's\n" +
			"long names. -S and -E take YYYY-MM-DD[THH:MM[:SS]], MM/DD[/YY], HH:MM[:SS] (today),\n" +
			"now[-N[seconds|minutes|hours|days|weeks]], today or midnight. --format columns: " + sacctFieldNames() + ",\n" +
			"each NAME or NAME%WIDTH. -X is accepted: skein jobs have no steps.",
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "user", Aliases: []string{"u"}, Usage: "only the jobs of these `USERS` (comma-separated)"},
			&ucli.StringFlag{Name: "starttime", Aliases: []string{"S"}, Usage: "only jobs going at or after `TIME`"},
			&ucli.StringFlag{Name: "endtime", Aliases: []string{"E"}, Usage: "only jobs going at or before `TIME`"},
			&ucli.StringFlag{Name: "state", Aliases: []string{"s"}, Usage: "only jobs in these `STATES` (comma-separated names or codes)"},
			&ucli.StringFlag{Name: "jobs", Aliases: []string{"j"}, Usage: "only these job `IDS` (comma-separated prefixes)"},
			&ucli.StringFlag{Name: "format", Aliases: []string{"o"}, Usage: "print these comma-separated `COLUMNS`"},
			&ucli.BoolFlag{Name: "parsable2", Aliases: []string{"P"}, Usage: "print columns separated by |, unpadded"},
			&ucli.BoolFlag{Name: "noheader", Aliases: []string{"n"}, Usage: "print no header"},
			&ucli.BoolFlag{Name: "allocations", Aliases: []string{"X"}, Usage: "only allocations, not steps (skein jobs have no steps)"},
			&ucli.BoolFlag{Name: "allusers", Aliases: []string{"a"}, Usage: "every user's jobs (what skein shows without -u)"},
			&ucli.BoolFlag{Name: "brief", Aliases: []string{"b"}, Usage: "the columns " + sacctBrief},
			&ucli.BoolFlag{Name: "long", Aliases: []string{"l"}, Usage: "the columns " + sacctLong},
			&ucli.StringFlag{Name: "name", Usage: "only the jobs with these `NAMES` (comma-separated)"},
			&ucli.BoolFlag{Name: "json", Usage: "print JSON"},
		},
		Action: sacctAction,
	}
}

// sacctFieldNames lists the column names sacct --format takes.
func sacctFieldNames() string {
	names := make([]string, len(sacctFields))
	for i, f := range sacctFields {
		names[i] = f.name
	}
	return strings.Join(names, " ")
}

// sacctColumn is a column picked by --format, at its width.
type sacctColumn struct {
	field sacctField
	width int
}

// parseSacctFormat parses --format: comma-separated names, each with an
// optional %WIDTH.
func parseSacctFormat(s string) ([]sacctColumn, error) {
	var cols []sacctColumn
	for _, item := range splitList(s) {
		name, width, hasWidth := strings.Cut(item, "%")
		i := slices.IndexFunc(sacctFields, func(f sacctField) bool { return strings.EqualFold(f.name, name) })
		if i < 0 {
			return nil, fmt.Errorf("unknown column %q: want some of %s", name, sacctFieldNames())
		}
		col := sacctColumn{field: sacctFields[i], width: sacctFields[i].width}
		if hasWidth {
			w, err := strconv.Atoi(width)
			if err != nil || w < 1 || w > 1024 {
				return nil, fmt.Errorf("column %s: width %q: want 1 to 1024", name, width)
			}
			col.width = w
		}
		cols = append(cols, col)
	}
	if len(cols) == 0 {
		return nil, fmt.Errorf("no column given")
	}
	return cols, nil
}

// sacctJob is one job in sacct --json.
type sacctJob struct {
	JobID     string    `json:"job_id"`
	Name      string    `json:"name"`
	User      string    `json:"user"`
	Partition string    `json:"partition"`
	State     string    `json:"state"`
	ExitCode  int       `json:"exit_code"`
	Reason    string    `json:"reason,omitempty"`
	Elapsed   int64     `json:"elapsed_seconds"`
	Submitted time.Time `json:"submit_time"`
	Started   time.Time `json:"start_time,omitzero"`
	Ended     time.Time `json:"end_time,omitzero"`
	Nodes     int       `json:"nodes"`
	GPUs      int       `json:"alloc_gpus"`
	// MaxRSS is the most memory one allocation of the job held, and
	// TotalCPU the CPU time of all of them; absent for a job no node
	// counted (unconfined, or not yet over).
	MaxRSS   int64   `json:"max_rss_bytes,omitempty"`
	TotalCPU float64 `json:"total_cpu_seconds,omitempty"`
}

// slurmMaxRSS renders the most memory an allocation of the job held as
// sacct does, in KiB ("65536K"); empty where nothing was counted.
func slurmMaxRSS(u *structs.AllocUsage) string {
	if u == nil {
		return ""
	}
	return strconv.FormatInt((u.MemoryPeakBytes+1023)/1024, 10) + "K"
}

// slurmTotalCPU renders the job's CPU time as sacct does: MM:SS.mmm under
// an hour, [D-]HH:MM:SS beyond; empty where nothing was counted.
func slurmTotalCPU(u *structs.AllocUsage) string {
	if u == nil {
		return ""
	}
	d := time.Duration(u.CPUTime)
	if d < time.Hour {
		ms := d.Milliseconds()
		return fmt.Sprintf("%02d:%02d.%03d", ms/60000, ms/1000%60, ms%1000)
	}
	return slurmElapsed(d)
}

func sacctAction(c *ucli.Context) error {
	_, cl, err := commandClient(c)
	if err != nil {
		return err
	}
	now := timeNow()
	users := splitList(c.String("user"))
	for _, u := range users {
		if err := checkFlag(c, "user", structs.ValidateUserName(u)); err != nil {
			return err
		}
	}
	ids := splitList(c.String("jobs"))
	var from, to time.Time
	if len(ids) == 0 {
		y, m, d := now.In(slurmZone).Date()
		from = time.Date(y, m, d, 0, 0, 0, 0, slurmZone)
	}
	if c.IsSet("starttime") {
		if from, err = slurm.ParseDate(c.String("starttime"), now); err != nil {
			return usagef(c, "-S: %v", err)
		}
	}
	if c.IsSet("endtime") {
		if to, err = slurm.ParseDate(c.String("endtime"), now); err != nil {
			return usagef(c, "-E: %v", err)
		}
	}
	var states []slurmState
	if c.IsSet("state") {
		if states, err = parseSlurmStates(c.String("state")); err != nil {
			return usagef(c, "-s: %v", err)
		}
	}
	format := sacctDefault
	switch {
	case c.IsSet("format"):
		format = c.String("format")
	case c.Bool("brief"):
		format = sacctBrief
	case c.Bool("long"):
		format = sacctLong
	}
	names := splitList(c.String("name"))
	cols, err := parseSacctFormat(format)
	if err != nil {
		return usagef(c, "--format: %v", err)
	}

	jq := api.JobsQuery{All: true}
	if len(users) == 1 {
		jq.Owner = users[0]
	}
	jobs, err := cl.JobsAll(c.Context, jq)
	if err != nil {
		return err
	}
	named := idMatcher(jobs, ids)
	var rows []sacctRow
	for i := range jobs {
		j := &jobs[i]
		s := stateOf(j)
		// A job is in the window while it waits or runs: from its
		// submission to its end, or to now.
		end := j.FinishedAt
		if end.IsZero() {
			end = now
		}
		switch {
		case len(users) > 0 && !slices.Contains(users, j.Owner):
		case states != nil && !slices.Contains(states, s):
		case len(ids) > 0 && !named(j):
		case len(names) > 0 && !slices.Contains(names, jobName(j)):
		case !from.IsZero() && end.Before(from):
		case !to.IsZero() && j.SubmittedAt.After(to):
		default:
			rows = append(rows, sacctRow{job: j, state: s, now: now})
		}
	}
	if slices.ContainsFunc(cols, func(col sacctColumn) bool { return col.field.name == "NodeList" }) {
		for i := range rows {
			if rows[i].job.StartedAt.IsZero() {
				continue
			}
			d, err := cl.Job(c.Context, rows[i].job.ID)
			if err != nil {
				return err
			}
			rows[i].nodes = lastAttemptNodes(d)
		}
	}
	if c.Bool("json") {
		out := make([]sacctJob, len(rows))
		for i, r := range rows {
			out[i] = sacctJob{
				JobID: r.job.ID, Name: r.job.Spec.Name, User: r.job.Owner, Partition: jobPartition(r.job),
				State: r.state.name, ExitCode: r.job.ExitCode, Reason: r.job.Reason,
				Elapsed:   int64(elapsed(r.job, now) / time.Second),
				Submitted: r.job.SubmittedAt, Started: r.job.StartedAt, Ended: r.job.FinishedAt,
				Nodes: jobNodes(r.job), GPUs: jobNodes(r.job) * r.job.Spec.GPUs,
			}
			if u := r.job.Usage; u != nil {
				out[i].MaxRSS, out[i].TotalCPU = u.MemoryPeakBytes, time.Duration(u.CPUTime).Seconds()
			}
		}
		return printJSON(c.App.Writer, out)
	}
	var b strings.Builder
	line := func(cell func(sacctColumn) string) {
		cells := make([]string, len(cols))
		for i, col := range cols {
			v := printable(cell(col))
			if !c.Bool("parsable2") {
				v = sacctCell(v, col.width, col.field.name == "JobID")
			}
			cells[i] = v
		}
		if c.Bool("parsable2") {
			b.WriteString(strings.Join(cells, "|") + "\n")
		} else {
			b.WriteString(strings.Join(cells, " ") + " \n")
		}
	}
	if !c.Bool("noheader") {
		line(func(col sacctColumn) string { return col.field.name })
		if !c.Bool("parsable2") {
			line(func(col sacctColumn) string { return strings.Repeat("-", col.width) })
		}
	}
	for _, r := range rows {
		line(func(col sacctColumn) string { return col.field.value(r) })
	}
	_, err = fmt.Fprint(c.App.Writer, b.String())
	return err
}

// sacctCell fits a value to its column as sacct does: padded, aligned
// right unless left, and cut with a + at the end when too long.
func sacctCell(v string, width int, left bool) string {
	if r := []rune(v); len(r) > width {
		return string(r[:width-1]) + "+"
	}
	return fitWidth(v, width, !left)
}

// lastAttemptNodes are the names of the nodes the job's last attempt
// was placed on.
func lastAttemptNodes(d *api.JobDetail) []string {
	last := 0
	for _, a := range d.Allocations {
		last = max(last, a.Attempt)
	}
	var names []string
	for _, a := range d.Allocations {
		if a.Attempt == last {
			names = append(names, cmp.Or(d.Nodes[a.NodeID], a.NodeID))
		}
	}
	return names
}
