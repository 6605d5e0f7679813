package cli

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

// defaultPartition is the partition of the nodes that declare none;
// sinfo marks it with a * as Slurm marks its default partition.
const defaultPartition = structs.DefaultPartition

// Slurm's default sinfo formats, summarised and node by node (-N), with
// the GPUs (GRES) added; their GRES and NODELIST are as wide as their
// widest value (fitColumns).
const (
	sinfoFormat      = "%9P %.5a %.10l %.6D %.6t %G %N"
	sinfoNodesFormat = "%N %.6D %9P %.6t %G"
	// -s (one line per partition), -l (long) and -R (the reasons nodes
	// are out of service), as Slurm's.
	sinfoSummaryFormat = "%9P %.5a %.10l %.16F %N"
	sinfoLongFormat    = "%9P %.5a %.10l %.10s %.4r %.8h %.10g %.6D %.11T %G %N"
	sinfoReasonsFormat = "%20E %9u %19H %N"
)

// sinfoNode is one node as sinfo sees it.
type sinfoNode struct {
	name      string
	partition string
	state     nodeState
	cpus      int
	memoryMiB int64
	gres      string
	reason    string
}

// nodeState is a Slurm node state: long name and compact form.
type nodeState struct{ name, code string }

// sinfoRow is a line of sinfo: nodes of one partition in one state with
// the same GPUs (one node with -N).
type sinfoRow struct {
	partition string
	nodes     []sinfoNode
	// settings are the partition's (zero: none).
	settings structs.Partition
}

// sinfoFields are the `%` fields sinfo -o supports, named as Slurm's.
var sinfoFields = map[byte]formatField[sinfoRow]{
	'P': {"PARTITION", func(r sinfoRow) string {
		if r.partition == defaultPartition {
			return r.partition + "*"
		}
		return r.partition
	}},
	'R': {"PARTITION", func(r sinfoRow) string { return r.partition }},
	'a': {"AVAIL", func(sinfoRow) string { return "up" }},
	'l': {"TIMELIMIT", func(r sinfoRow) string {
		if r.settings.MaxTime == 0 {
			return "infinite"
		}
		return slurmTimeLimit(r.settings.MaxTime)
	}},
	'D': {"NODES", func(r sinfoRow) string { return strconv.Itoa(len(r.nodes)) }},
	't': {"STATE", func(r sinfoRow) string { return r.nodes[0].state.code }},
	'T': {"STATE", func(r sinfoRow) string { return r.nodes[0].state.name }},
	'N': {"NODELIST", func(r sinfoRow) string {
		names := make([]string, len(r.nodes))
		for i, n := range r.nodes {
			names[i] = n.name
		}
		return structs.HostList(names)
	}},
	'G': {"GRES", func(r sinfoRow) string { return r.nodes[0].gres }},
	'c': {"CPUS", func(r sinfoRow) string { return minPlus(r.nodes, func(n sinfoNode) int64 { return int64(n.cpus) }) }},
	'm': {"MEMORY", func(r sinfoRow) string { return minPlus(r.nodes, func(n sinfoNode) int64 { return n.memoryMiB }) }},
	'E': {"REASON", func(r sinfoRow) string { return cmp.Or(r.nodes[0].reason, "none") }},
	'F': {"NODES(A/I/O/T)", func(r sinfoRow) string {
		var a, i, o int
		for _, n := range r.nodes {
			switch n.state {
			case nodeAllocated, nodeMixed:
				a++
			case nodeIdle:
				i++
			default:
				o++
			}
		}
		return fmt.Sprintf("%d/%d/%d/%d", a, i, o, len(r.nodes))
	}},
	's': {"JOB_SIZE", func(r sinfoRow) string {
		if r.settings.MaxNodes == 0 {
			return "1-infinite"
		}
		return "1-" + strconv.Itoa(r.settings.MaxNodes)
	}},
	'r': {"ROOT", func(sinfoRow) string { return "no" }},
	'h': {"OVERSUBS", func(sinfoRow) string { return "NO" }},
	'g': {"GROUPS", func(sinfoRow) string { return "all" }},
	'u': {"USER", func(sinfoRow) string { return "(null)" }},
	'H': {"TIMESTAMP", func(sinfoRow) string { return "Unknown" }},
}

// minPlus renders the smallest of the nodes' values, with a + when some
// have more, as Slurm shows CPUs and memory of a group of nodes.
func minPlus(nodes []sinfoNode, v func(sinfoNode) int64) string {
	lo, hi := v(nodes[0]), v(nodes[0])
	for _, n := range nodes[1:] {
		lo, hi = min(lo, v(n)), max(hi, v(n))
	}
	s := strconv.FormatInt(lo, 10)
	if hi > lo {
		s += "+"
	}
	return s
}

// Slurm's node states, as sinfo shows them.
var (
	nodeIdle      = nodeState{"IDLE", "idle"}
	nodeMixed     = nodeState{"MIXED", "mix"}
	nodeAllocated = nodeState{"ALLOCATED", "alloc"}
	nodeDraining  = nodeState{"DRAINING", "drng"}
	nodeDrained   = nodeState{"DRAINED", "drain"}
	nodeDown      = nodeState{"DOWN", "down"}
)

// nodeStateOf maps a node to Slurm's state: down and left nodes are
// down; a draining node (skein node drain) is drng while work still runs
// on it, then drain;
// a ready node is idle with nothing running, alloc with every GPU in use,
// else mix.
func nodeStateOf(n *api.NodeInfo) nodeState {
	switch {
	case n.Status == structs.NodeDown || n.Status == structs.NodeLeft:
		return nodeDown
	case n.Status == structs.NodeDraining || n.Drain != nil:
		if n.LiveAllocs > 0 {
			return nodeDraining
		}
		return nodeDrained
	}
	switch {
	case n.LiveAllocs == 0:
		return nodeIdle
	case n.GPUsTotal > 0 && len(n.GPUJobs) == n.GPUsTotal:
		return nodeAllocated
	}
	return nodeMixed
}

// gresType is the GRES type of a GPU model: its first word after the
// vendor that holds a digit ("NVIDIA H100 80GB HBM3" is h100), in lower
// case. It is a part of the model's name, so --gres=gpu:TYPE:N and
// --gpu-model TYPE select it.
func gresType(model string) string {
	words := strings.Fields(strings.ToLower(model))
	if len(words) > 1 && words[0] == "nvidia" {
		words = words[1:]
	}
	if len(words) == 0 {
		return "gpu"
	}
	for _, w := range words {
		if strings.ContainsAny(w, "0123456789") {
			return w
		}
	}
	return words[0]
}

// nodeGRES renders a node's GPUs as Slurm's GRES: gpu:TYPE:N per model,
// (null) without GPUs.
func nodeGRES(gpus []structs.GPU) string {
	var types []string
	count := map[string]int{}
	for _, g := range gpus {
		t := gresType(g.Model)
		if count[t] == 0 {
			types = append(types, t)
		}
		count[t]++
	}
	if len(types) == 0 {
		return "(null)"
	}
	parts := make([]string, len(types))
	for i, t := range types {
		parts[i] = fmt.Sprintf("gpu:%s:%d", t, count[t])
	}
	return strings.Join(parts, ",")
}

func sinfoCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "sinfo",
		Usage: "list partitions and nodes as Slurm's sinfo does",
		Description: "A partition is the nodes that declare it (skein agent --partition NAME); nodes that declare\n" +
			"none are in the default partition skein*. Node states: idle (nothing running), mix, alloc (every GPU in\n" +
			"use), drng (draining, work still running), drain (drained), down (down or left). GRES is the\n" +
			"node's GPUs as gpu:TYPE:N, TYPE being the model's first word with a digit, in lower case.\n" +
			"-o fields: %P %R %a %l %D %t %T %N %G %c %m %E %F %s %r %h %g %u %H, as %[.][WIDTH]LETTER.",
		Flags: []ucli.Flag{
			&ucli.BoolFlag{Name: "Node", Aliases: []string{"N"}, Usage: "one line per node"},
			&ucli.StringFlag{Name: "partition", Aliases: []string{"p"}, Usage: "only the nodes of these `PARTITIONS` (comma-separated)"},
			&ucli.StringFlag{Name: "format", Aliases: []string{"o"}, Usage: "print the `FORMAT` of % fields (see the description)"},
			&ucli.BoolFlag{Name: "summarize", Aliases: []string{"s"}, Usage: "one line per partition, its nodes counted as allocated/idle/other/total"},
			&ucli.BoolFlag{Name: "long", Aliases: []string{"l"}, Usage: "Slurm's long format"},
			&ucli.BoolFlag{Name: "list-reasons", Aliases: []string{"R"}, Usage: "the nodes out of service (draining, drained, down), with why"},
			&ucli.StringFlag{Name: "states", Aliases: []string{"t"}, Usage: "only the nodes in these `STATES` (idle, mix, alloc, drng, drain, down, or their long names; comma-separated)"},
			&ucli.BoolFlag{Name: "exact", Aliases: []string{"e"}, Usage: "group only nodes with the same CPUs and memory"},
			noHeaderFlag(),
			&ucli.BoolFlag{Name: "json", Usage: "print JSON"},
			helpOnlyFlag(),
		},
		HideHelp: true, // its -h is --noheader
		Action:   sinfoAction,
	}
}

// sinfoJSON is one node in sinfo --json.
type sinfoJSON struct {
	Name      string `json:"name"`
	Partition string `json:"partition"`
	State     string `json:"state"`
	StateCode string `json:"state_code"`
	CPUs      int    `json:"cpus"`
	MemoryMiB int64  `json:"memory_mib"`
	GRES      string `json:"gres"`
	GPUsTotal int    `json:"gpus_total"`
	GPUsFree  int    `json:"gpus_free"`
	Reason    string `json:"reason,omitempty"`
}

func sinfoAction(c *ucli.Context) error {
	_, cl, err := commandClient(c)
	if err != nil {
		return err
	}
	format := sinfoFormat
	switch {
	case c.IsSet("format"):
		format = c.String("format")
	case c.Bool("list-reasons"):
		format = sinfoReasonsFormat
	case c.Bool("summarize"):
		format = sinfoSummaryFormat
	case c.Bool("Node"):
		format = sinfoNodesFormat
	case c.Bool("long"):
		format = sinfoLongFormat
	}
	var states []string
	for _, s := range splitList(strings.ToLower(c.String("states"))) {
		st, ok := nodeStateNamed(s)
		if !ok {
			return usagef(c, "-t: unknown state %q: want idle, mix, alloc, drng, drain or down", s)
		}
		states = append(states, st.code)
	}
	items, err := parseFormat(format, sinfoFields)
	if err != nil {
		return usagef(c, "-o: %v", err)
	}
	partitions := splitList(c.String("partition"))
	infos, err := cl.Nodes(c.Context)
	if err != nil {
		return err
	}
	settings, err := partitionSettingsOf(c, cl)
	if err != nil {
		return err
	}
	var nodes []sinfoNode
	var out []sinfoJSON
	for i := range infos {
		n := &infos[i]
		parts := n.Partitions
		if len(parts) == 0 {
			parts = []string{defaultPartition}
		}
		for _, p := range parts { // a node is in each of its partitions
			sn := sinfoNode{
				name: n.Name, partition: p, state: nodeStateOf(n),
				cpus: n.CPUs, memoryMiB: n.MemoryMiB, gres: nodeGRES(n.GPUs), reason: n.StatusReason,
			}
			switch {
			case len(partitions) > 0 && !slices.Contains(partitions, sn.partition):
				continue
			case len(states) > 0 && !slices.Contains(states, sn.state.code):
				continue
			case c.Bool("list-reasons") && (sn.state == nodeIdle || sn.state == nodeMixed || sn.state == nodeAllocated):
				continue
			}
			nodes = append(nodes, sn)
			out = append(out, sinfoJSON{
				Name: sn.name, Partition: sn.partition, State: sn.state.name, StateCode: sn.state.code,
				CPUs: sn.cpus, MemoryMiB: sn.memoryMiB, GRES: sn.gres, GPUsTotal: n.GPUsTotal, GPUsFree: n.GPUsFree, Reason: sn.reason,
			})
		}
	}
	if c.Bool("json") {
		if out == nil {
			out = []sinfoJSON{}
		}
		return printJSON(c.App.Writer, out)
	}
	// The default partition first, then by name; within one, by state.
	slices.SortStableFunc(nodes, func(a, b sinfoNode) int {
		return cmp.Or(
			cmp.Compare(b2i(b.partition == defaultPartition), b2i(a.partition == defaultPartition)),
			cmp.Compare(a.partition, b.partition),
			cmp.Compare(a.state.code, b.state.code),
			cmp.Compare(a.gres, b.gres),
			cmp.Compare(a.name, b.name))
	})
	var rows []sinfoRow
	for _, n := range nodes {
		if k := len(rows) - 1; !c.Bool("Node") && k >= 0 && sameRow(c, rows[k].nodes[0], n) {
			rows[k].nodes = append(rows[k].nodes, n)
			continue
		}
		rows = append(rows, sinfoRow{partition: n.partition, nodes: []sinfoNode{n}, settings: settings[n.partition]})
	}
	if !c.IsSet("format") {
		fitColumns(items, rows, 'G', 'N')
	}
	var b strings.Builder
	if c.Bool("long") && !c.Bool("noheader") {
		b.WriteString(timeNow().Format("Mon Jan 2 15:04:05 2006") + "\n") // as sinfo -l starts
	}
	if !c.Bool("noheader") {
		b.WriteString(renderFormat(items, sinfoRow{}, true) + "\n")
	}
	for _, r := range rows {
		b.WriteString(renderFormat(items, r, false) + "\n")
	}
	_, err = fmt.Fprint(c.App.Writer, b.String())
	return err
}

// fitColumns widens the fields of the given letters that have no width
// to their widest value or header, so that the columns after them line
// up.
func fitColumns[T any](items []formatItem[T], rows []T, letters ...byte) {
	for i := range items {
		it := &items[i]
		if it.field == nil || it.width != 0 || !slices.Contains(letters, it.letter) {
			continue
		}
		w := len(it.field.header)
		for _, r := range rows {
			w = max(w, len([]rune(printable(it.field.value(r)))))
		}
		it.width = w
	}
}

// b2i is 1 for true, 0 for false.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// sameRow reports whether node n goes on the line of node first: in the
// same partition and, unless -s, in the same state with the same GPUs
// (and, with -e, the same CPUs and memory); with -R, with one reason.
func sameRow(c *ucli.Context, first, n sinfoNode) bool {
	switch {
	case first.partition != n.partition && !c.Bool("list-reasons"):
		return false
	case c.Bool("list-reasons"):
		return first.reason == n.reason
	case c.Bool("summarize"):
		return true
	case c.Bool("exact") && (first.cpus != n.cpus || first.memoryMiB != n.memoryMiB):
		return false
	}
	return first.state == n.state && first.gres == n.gres
}

// nodeStateNamed finds a node state by its code or long name, in any
// case.
func nodeStateNamed(s string) (nodeState, bool) {
	for _, st := range []nodeState{nodeIdle, nodeMixed, nodeAllocated, nodeDraining, nodeDrained, nodeDown} {
		if strings.EqualFold(s, st.code) || strings.EqualFold(s, st.name) {
			return st, true
		}
	}
	return nodeState{}, false
}

// partitionSettingsOf are the partitions' settings, by name; none from
// an agent that predates them.
func partitionSettingsOf(c *ucli.Context, cl *api.Client) (map[string]structs.Partition, error) {
	parts, err := cl.Partitions(c.Context)
	if e := (*api.Error)(nil); errors.As(err, &e) && e.StatusCode == http.StatusNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := map[string]structs.Partition{}
	for _, p := range parts {
		out[p.Name] = p.Partition
	}
	return out, nil
}
