package cli

import (
	"cmp"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/slurm"
	"github.com/skein-dev/skein/structs"
)

func scontrolCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "scontrol",
		Usage:     "show and change jobs, nodes and partitions as Slurm's scontrol does",
		ArgsUsage: "COMMAND [ARGS...]",
		Description: "Commands:\n" +
			"  show hostnames [LIST]   one name per line of a host list (default: $SLURM_JOB_NODELIST)\n" +
			"  show hostlist NAMES     the compressed host list of names (comma-separated)\n" +
			"  show job [ID]           a job (by number, NUMBER_INDEX or ID) or every job still going\n" +
			"  show node [NAME]        a node, or every node\n" +
			"  show partition [NAME]   a partition, or every partition\n" +
			"  hold ID[,ID...]         keep queued jobs from starting (an array's number: its queued tasks)\n" +
			"  release ID[,ID...]      let held jobs start\n" +
			"  update JobId=ID KEY=VALUE...  change a queued job: JobName, TimeLimit, Priority\n" +
			"                          (Slurm's time forms), or Hold=1 / Hold=0\n" +
			"  requeue ID[,ID...]      stop running jobs and queue them again, using no restart\n" +
			"Without an ID, show job, hold, release and requeue take $SLURM_JOB_ID, as inside a job.",
		Flags: []ucli.Flag{
			&ucli.BoolFlag{Name: "oneliner", Aliases: []string{"o"}, Usage: "print each record on one line"},
			&ucli.BoolFlag{Name: "details", Aliases: []string{"d"}, Usage: "accepted, as in Slurm; skein shows every detail it has"},
		},
		Action: scontrolAction,
	}
}

// scontrolRefused are the scontrol commands skein refuses, saying what
// to do instead.
var scontrolRefused = []string{"suspend", "resume", "reboot", "reconfigure", "create", "delete", "top", "uhold", "notify"}

func scontrolAction(c *ucli.Context) error {
	args := c.Args().Slice()
	if len(args) == 0 {
		return usagef(c, "missing the command: show, hold, release, update or requeue (see skein scontrol --help)")
	}
	cmd, rest := strings.ToLower(args[0]), args[1:]
	switch cmd {
	case "show":
		return scontrolShow(c, rest)
	case "hold", "release":
		ids, err := scontrolIDs(c, rest)
		if err != nil {
			return err
		}
		hold := cmd == "hold"
		return scontrolUpdate(c, ids, api.JobUpdate{Hold: &hold})
	case "update":
		return scontrolUpdateArgs(c, rest)
	case "requeue":
		ids, err := scontrolIDs(c, rest)
		if err != nil {
			return err
		}
		return scontrolRequeue(c, ids)
	}
	if slices.Contains(scontrolRefused, cmd) {
		return usagef(c, "%s: skein has no %s: cancel the job (scancel) and submit it again, or hold and release a queued one", cmd, cmd)
	}
	return usagef(c, "unknown command %q: want show, hold, release, update or requeue", args[0])
}

// scontrolIDs reads job IDs (comma- or space-separated), defaulting to
// $SLURM_JOB_ID inside a job.
func scontrolIDs(c *ucli.Context, args []string) ([]string, error) {
	var ids []string
	for _, a := range args {
		ids = append(ids, splitList(a)...)
	}
	if len(ids) == 0 {
		if id := os.Getenv("SLURM_JOB_ID"); id != "" {
			return []string{id}, nil
		}
		return nil, usagef(c, "missing the job ID")
	}
	return ids, nil
}

func scontrolShow(c *ucli.Context, args []string) error {
	if len(args) == 0 {
		return usagef(c, "show: what? hostnames, hostlist, job, node or partition")
	}
	what, rest := strings.ToLower(args[0]), args[1:]
	w := c.App.Writer
	switch what {
	case "hostnames", "hostname":
		list := strings.Join(rest, ",")
		if list == "" {
			list = os.Getenv("SLURM_JOB_NODELIST")
		}
		if list == "" {
			return usagef(c, "show hostnames: give a host list, or run it in a job ($SLURM_JOB_NODELIST)")
		}
		names, err := structs.ExpandHostList(list)
		if err != nil {
			return usagef(c, "show hostnames: %v", err)
		}
		for _, n := range names {
			fmt.Fprintln(w, n)
		}
		return nil
	case "hostlist", "hostlistsorted":
		var names []string
		for _, a := range rest {
			more, err := structs.ExpandHostList(a)
			if err != nil {
				return usagef(c, "show hostlist: %v", err)
			}
			names = append(names, more...)
		}
		if len(names) == 0 {
			return usagef(c, "show hostlist: give the names")
		}
		_, err := fmt.Fprintln(w, structs.HostList(names))
		return err
	case "job", "jobs":
		return scontrolShowJobs(c, rest)
	case "node", "nodes":
		return scontrolShowNodes(c, rest)
	case "partition", "partitions":
		return scontrolShowPartitions(c, rest)
	}
	return usagef(c, "show %s: skein shows hostnames, hostlist, job, node and partition", args[0])
}

// scontrolRecord prints key=value pairs as scontrol does: lines of
// pairs, the later ones indented, or all on one line with -o.
func scontrolRecord(c *ucli.Context, lines [][]string) {
	var b strings.Builder
	for i, l := range lines {
		switch {
		case i == 0:
		case c.Bool("oneliner"):
			b.WriteString(" ")
		default:
			b.WriteString("\n   ")
		}
		b.WriteString(strings.Join(l, " "))
	}
	if !c.Bool("oneliner") {
		b.WriteString("\n")
	}
	fmt.Fprintln(c.App.Writer, b.String())
}

func scontrolShowJobs(c *ucli.Context, args []string) error {
	cl, err := newClient(c)
	if err != nil {
		return err
	}
	ids := args
	all := len(ids) == 0
	jobs, err := cl.JobsAll(c.Context, api.JobsQuery{All: !all})
	if err != nil {
		return err
	}
	var picked []structs.Job
	if all {
		for _, j := range jobs {
			if stateOf(&j).active() {
				picked = append(picked, j)
			}
		}
	} else {
		named := idMatcher(jobs, ids)
		for _, j := range jobs {
			if named(&j) {
				picked = append(picked, j)
			}
		}
		if len(picked) == 0 {
			return fmt.Errorf("job %s: invalid job id specified (no such job)", strings.Join(ids, ","))
		}
	}
	nodes, err := runningNodes(c.Context, cl, picked)
	if err != nil {
		return err
	}
	if all && len(picked) == 0 {
		_, err := fmt.Fprintln(c.App.Writer, "No jobs in the system")
		return err
	}
	now := time.Now()
	for i := range picked {
		scontrolRecord(c, jobRecord(&picked[i], nodes[picked[i].ID], now))
	}
	return nil
}

// jobRecord is a job as scontrol show job prints it.
func jobRecord(j *structs.Job, nodes []string, now time.Time) [][]string {
	s := &j.Spec
	st := stateOf(j)
	first := []string{"JobId=" + strconv.FormatUint(j.Number, 10)}
	if j.Number == 0 {
		first[0] = "JobId=" + structs.ShortID(j.ID)
	}
	if j.ArrayID != "" {
		first = append(first, "ArrayJobId="+strconv.FormatUint(j.ArrayNumber, 10), "ArrayTaskId="+strconv.Itoa(j.ArrayIndex))
	}
	first = append(first, "JobName="+orNull(s.Name))
	deps := "(null)"
	if len(s.After) > 0 {
		var d []string
		for _, dep := range s.After {
			d = append(d, "after"+dep.Condition+":"+structs.ShortID(dep.JobID))
		}
		deps = strings.Join(d, ",")
	}
	if s.Singleton {
		deps = "singleton"
	}
	reason := "None"
	if st == statePending {
		reason = slurmReason(j, now)
	}
	nodeList := "(null)"
	if len(nodes) > 0 {
		nodeList = structs.HostList(nodes)
	}
	gres := ""
	if s.GPUs > 0 {
		gres = fmt.Sprintf(",gres/gpu=%d", s.GPUs*jobNodes(j))
	}
	cpus := max(s.CPUs, 1) * jobNodes(j)
	return [][]string{
		first,
		{"UserId=" + orNull(j.Owner), "Account=(null)", "QOS=normal"},
		{"Priority=" + strconv.Itoa(s.Priority), "Nice=0"},
		{"JobState=" + st.name, "Reason=" + reason, "Dependency=" + deps},
		{"Requeue=" + b2s(s.Restarts > 0), "Restarts=" + strconv.Itoa(max(j.Attempts-1, 0)), "BatchFlag=1", "ExitCode=" + exitCodeField(j)},
		{"RunTime=" + slurmElapsed(elapsed(j, now)), "TimeLimit=" + slurmTimeLimit(s.TimeLimit)},
		{"SubmitTime=" + slurmTimestamp(j.SubmittedAt), "StartTime=" + slurmTimestamp(j.StartedAt), "EndTime=" + slurmTimestamp(j.FinishedAt)},
		{"Partition=" + jobPartition(j), "Held=" + b2s(j.Held)},
		{"NodeList=" + nodeList, "ExcNodeList=" + orNull(strings.Join(s.ExcludeNodes, ",")), "ReqNodeList=" + orNull(strings.Join(s.NodeList, ","))},
		{"NumNodes=" + strconv.Itoa(jobNodes(j)), "NumCPUs=" + strconv.Itoa(cpus), "NumTasks=" + strconv.Itoa(jobNodes(j)), "CPUs/Task=" + strconv.Itoa(max(s.CPUs, 1))},
		{fmt.Sprintf("TRES=cpu=%d,mem=%dM,node=%d%s", cpus, int64(s.MemoryMiB)*int64(jobNodes(j)), jobNodes(j), gres)},
		{"MinMemoryNode=" + memoryField(int64(s.MemoryMiB)), "Exclusive=" + b2s(s.Exclusive)},
		{"WorkDir=" + orNull(s.Workdir)},
		{"SkeinId=" + j.ID, "SkeinReason=" + strconv.Quote(j.Reason)},
	}
}

func orNull(s string) string { return cmp.Or(s, "(null)") }

func b2s(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

func scontrolShowNodes(c *ucli.Context, args []string) error {
	cl, err := newClient(c)
	if err != nil {
		return err
	}
	infos, err := cl.Nodes(c.Context)
	if err != nil {
		return err
	}
	slices.SortFunc(infos, func(a, b api.NodeInfo) int { return cmp.Compare(a.Name, b.Name) })
	found := false
	for i := range infos {
		n := &infos[i]
		if len(args) > 0 && !slices.Contains(args, n.Name) {
			continue
		}
		found = true
		parts := n.Partitions
		if len(parts) == 0 {
			parts = []string{structs.DefaultPartition}
		}
		st := nodeStateOf(n)
		scontrolRecord(c, [][]string{
			{"NodeName=" + n.Name},
			{fmt.Sprintf("CPUTot=%d", n.CPUs), fmt.Sprintf("RealMemory=%d", n.MemoryMiB)},
			{"Gres=" + nodeGRES(n.GPUs), fmt.Sprintf("GresUsed=gpu:%d", n.GPUsTotal-n.GPUsFree)},
			{"State=" + strings.ToUpper(st.name), "Partitions=" + strings.Join(parts, ",")},
			{"Reason=" + orNull(n.StatusReason)},
		})
	}
	if !found && len(args) > 0 {
		return fmt.Errorf("node %s not found", strings.Join(args, ","))
	}
	return nil
}

func scontrolShowPartitions(c *ucli.Context, args []string) error {
	cl, err := newClient(c)
	if err != nil {
		return err
	}
	parts, err := cl.Partitions(c.Context)
	if err != nil {
		return err
	}
	infos, err := cl.Nodes(c.Context)
	if err != nil {
		return err
	}
	cpus := map[string]int{}
	for i := range infos {
		cpus[infos[i].Name] = infos[i].CPUs
	}
	found := false
	for _, p := range parts {
		if len(args) > 0 && !slices.Contains(args, p.Name) {
			continue
		}
		found = true
		total := 0
		for _, n := range p.Nodes {
			total += cpus[n]
		}
		defTime, maxNodes := "NONE", "UNLIMITED"
		if p.DefaultTime > 0 {
			defTime = slurmTimeLimit(p.DefaultTime)
		}
		if p.MaxNodes > 0 {
			maxNodes = strconv.Itoa(p.MaxNodes)
		}
		scontrolRecord(c, [][]string{
			{"PartitionName=" + p.Name},
			{"Default=" + yesNo(p.Default), "State=UP", "MaxTime=" + slurmTimeLimit(p.MaxTime), "DefaultTime=" + defTime, "MaxNodes=" + maxNodes},
			{"Nodes=" + orNull(structs.HostList(p.Nodes))},
			{fmt.Sprintf("TotalCPUs=%d", total), fmt.Sprintf("TotalNodes=%d", len(p.Nodes))},
		})
	}
	if !found && len(args) > 0 {
		return fmt.Errorf("partition %s not found", strings.Join(args, ","))
	}
	return nil
}

func yesNo(b bool) string {
	if b {
		return "YES"
	}
	return "NO"
}

// scontrolUpdateArgs reads scontrol update's KEY=VALUE pairs.
func scontrolUpdateArgs(c *ucli.Context, args []string) error {
	var ids []string
	var u api.JobUpdate
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok {
			return usagef(c, "update: %q: want KEY=VALUE, like JobId=123 TimeLimit=2:00:00", a)
		}
		switch strings.ToLower(k) {
		case "jobid", "job":
			ids = append(ids, splitList(v)...)
		case "jobname", "name":
			u.Name = &v
		case "timelimit":
			d, err := slurm.ParseTime(v)
			if err != nil {
				return usagef(c, "update: TimeLimit=%s: %v", v, err)
			}
			u.TimeLimit = &d
		case "priority":
			p, err := strconv.Atoi(v)
			if err != nil {
				return usagef(c, "update: Priority=%s: want a whole number", v)
			}
			u.Priority = &p
		case "hold":
			h := v != "0" && !strings.EqualFold(v, "no")
			u.Hold = &h
		default:
			return usagef(c, "update: %s: skein changes JobName, TimeLimit, Priority and Hold of a queued job", k)
		}
	}
	if len(ids) == 0 {
		return usagef(c, "update: missing JobId=ID")
	}
	if u == (api.JobUpdate{}) {
		return usagef(c, "update: nothing to change: give JobName, TimeLimit, Priority or Hold")
	}
	return scontrolUpdate(c, ids, u)
}

// scontrolUpdate applies u to each job, saying on stderr what it could
// not change; an error (exit 1) if any.
func scontrolUpdate(c *ucli.Context, ids []string, u api.JobUpdate) error {
	cl, err := newClient(c)
	if err != nil {
		return err
	}
	failed := false
	for _, id := range ids {
		if _, err := cl.UpdateJob(c.Context, id, u); err != nil {
			fmt.Fprintf(c.App.ErrWriter, "scontrol: error: job %s: %v\n", id, err)
			failed = true
		}
	}
	if failed {
		return exitStatus(exitError)
	}
	return nil
}

// scontrolRequeue puts each running job back in the queue, as Slurm's
// requeue does, silent on success; what cannot be requeued (a finished
// job) is said on stderr, and exits 1.
func scontrolRequeue(c *ucli.Context, ids []string) error {
	cl, err := newClient(c)
	if err != nil {
		return err
	}
	failed := false
	for _, id := range ids {
		if _, err := cl.RequeueJob(c.Context, id); err != nil {
			fmt.Fprintf(c.App.ErrWriter, "scontrol: error: job %s: %v\n", id, err)
			failed = true
		}
	}
	if failed {
		return exitStatus(exitError)
	}
	return nil
}
