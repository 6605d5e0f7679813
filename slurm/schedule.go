package slurm

import (
	"slices"
	"strings"
	"time"

	"github.com/skein-dev/skein/structs"
)

// hold reads -H: the job is submitted held (scontrol release lets it
// run).
func (b *builder) hold(string) error {
	b.batch.Spec.Hold = true
	return nil
}

// date reads --begin's and --deadline's time, in Slurm's forms, from the
// time of the submission.
func (b *builder) date(v string) (time.Time, error) {
	now := b.in.Now
	if now.IsZero() {
		now = time.Now()
	}
	t, err := ParseDate(v, now)
	if err != nil {
		return time.Time{}, badValue("%v", err)
	}
	return t.UTC(), nil
}

// begin reads --begin: the job starts no earlier.
func (b *builder) begin(v string) (err error) {
	b.batch.Spec.Begin, err = b.date(v)
	return err
}

// deadline reads --deadline: the job is cancelled while it waits once it
// could no longer end by then.
func (b *builder) deadline(v string) (err error) {
	b.batch.Spec.Deadline, err = b.date(v)
	return err
}

// hosts reads a host list as Slurm writes it: names, commas, ranges.
func hosts(v string) ([]string, error) {
	names, err := structs.ExpandHostList(v)
	if err != nil {
		return nil, badValue("%v", err)
	}
	if len(names) == 0 {
		return nil, badValue("no node named")
	}
	if len(names) > structs.MaxNodeNames {
		return nil, badValue("%d nodes, more than the limit of %d", len(names), structs.MaxNodeNames)
	}
	return names, nil
}

// nodelist reads -w: the job runs on exactly these nodes (finish sets
// --nodes to their number when not given).
func (b *builder) nodelist(v string) (err error) {
	b.batch.Spec.NodeList, err = hosts(v)
	return err
}

// exclude reads -x: the job never runs on these nodes.
func (b *builder) exclude(v string) (err error) {
	b.batch.Spec.ExcludeNodes, err = hosts(v)
	return err
}

// cpusPerGPU reads --cpus-per-gpu: finish multiplies it by the GPUs per
// node.
func (b *builder) cpusPerGPU(v string) (err error) {
	b.cpusPerGPUs, err = count(v, 1, structs.MaxCPUs)
	return err
}

// minCPUs reads --mincpus: at least this many CPUs per node.
func (b *builder) minCPUs(v string) (err error) {
	b.minCPUsPerNode, err = count(v, 1, structs.MaxCPUs)
	return err
}

// priority reads --priority as skein's priority; nice reads --nice=N as
// priority -N (a nicer job waits behind others), --nice alone as 100.
func (b *builder) priority(v string) (err error) {
	b.batch.Spec.Priority, err = count(v, -structs.MaxPriority, structs.MaxPriority)
	return err
}

func (b *builder) nice(v string) error {
	if v == "" {
		v = "100"
	}
	n, err := count(v, -structs.MaxPriority, structs.MaxPriority)
	b.batch.Spec.Priority = -n
	return err
}

// waitAllNodes reads --wait-all-nodes=0|1: a skein job's ranks start
// once all its nodes are placed, so both are what skein does.
func (b *builder) waitAllNodes(v string) error {
	if v != "0" && v != "1" {
		return badValue("%q: want 0 or 1", v)
	}
	return nil
}

// killOnInvalidDep reads --kill-on-invalid-dep: yes is what skein does
// (a job whose dependency can never be met is cancelled); no, keeping it
// queued for ever, it does not.
func (b *builder) killOnInvalidDep(v string) error {
	switch v {
	case "yes":
		return nil
	case "no":
		return badValue("no: skein cancels a job whose dependency can never be met")
	}
	return badValue("%q: want yes or no", v)
}

// setCPUs sets the CPUs per node finish works out: -c per task times the
// tasks per node, --cpus-per-gpu times the GPUs, at least --mincpus.
func (b *builder) setCPUs(perNode int) error {
	spec := &b.batch.Spec
	cpus := spec.CPUs * perNode
	if b.cpusPerGPUs > 0 {
		if spec.GPUs == 0 {
			return b.badAt("cpus-per-gpu", "", "CPUs per GPU, but no GPUs asked for")
		}
		cpus = max(cpus, b.cpusPerGPUs*spec.GPUs)
	}
	cpus = max(cpus, b.minCPUsPerNode)
	if cpus > structs.MaxCPUs {
		return b.badAt("cpus-per-task", "", "%d CPUs per node, more than the limit of %d", cpus, structs.MaxCPUs)
	}
	spec.CPUs = cpus
	return nil
}

// mailType reads --mail-type: the events a mail is sent for, by the
// program the agents' --mail-prog names. TIME_LIMIT_50, _80 and _90
// (a share of the time limit) are read as TIME_LIMIT, STAGE_OUT as
// nothing skein does.
func (b *builder) mailType(v string) error {
	var types []string
	for _, t := range strings.Split(strings.ToUpper(v), ",") {
		switch {
		case strings.HasPrefix(t, "TIME_LIMIT"):
			t = structs.MailTimeLimit
		case t == "STAGE_OUT" || t == "":
			continue
		case !slices.Contains(structs.MailTypes, t):
			return badValue("%q: want some of %s", t, strings.Join(structs.MailTypes, ","))
		}
		if !slices.Contains(types, t) {
			types = append(types, t)
		}
	}
	if slices.Contains(types, structs.MailNone) {
		types = nil
	}
	b.batch.Spec.MailType = types
	return nil
}

// mailUser reads --mail-user: whom the mail goes to (default: the job's
// owner).
func (b *builder) mailUser(v string) error {
	b.batch.Spec.MailUser = v
	return nil
}
