package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/gpu"
	"github.com/skein-dev/skein/structs"
)

// GPU states as the UI colours them. A GPU is used while a live
// allocation holds it, else unhealthy, cordoned or foreign (in use by
// processes skein did not start) as its health says, else free.
const (
	gpuFree      = "free"
	gpuUsed      = "used"
	gpuUnhealthy = structs.GPUUnhealthy
	gpuCordoned  = structs.GPUCordoned
	gpuForeign   = structs.GPUForeign
)

// nodeTelemetryWait is how long a node's or GPU's page waits for another
// node to answer with its GPUs' telemetry; the page is shown without it
// past that. Pages refresh every refreshSeconds.
const nodeTelemetryWait = time.Second

// nodeRow is one node with its GPUs, as the overview and a node's page
// show it.
type nodeRow struct {
	Node   *structs.Node
	Leader bool
	// Local is this node. The overview reads the telemetry of this
	// node's GPUs only; a node's or GPU's page asks another node for its
	// own (nodeTelemetry).
	Local bool
	// Free, Used, Unhealthy and HeldBack (cordoned or foreign) count its
	// GPUs by state.
	Free, Used, Unhealthy, HeldBack int
	Live                            int
	GPUs                            []gpuCell
	// HasTelemetry says the GPUs' utilisation was read.
	HasTelemetry bool
	// NoTelemetry says, for another node, why its utilisation is not
	// shown ("" when it is, or was not asked for).
	NoTelemetry string
}

// gpuCell is one GPU, with what holds it and how busy it is.
type gpuCell struct {
	GPU   structs.GPU
	State string
	// Job holds the GPU when it is used.
	Job string
	// Sample is the GPU's latest telemetry, where it was read.
	Sample *gpu.Sample
}

// UtilClass is the CSS class of the GPU's utilisation, in tenths: "u0"
// to "u10"; "" without telemetry.
func (c gpuCell) UtilClass() string {
	if c.Sample == nil || c.Sample.Has&gpu.HasUtil == 0 {
		return ""
	}
	return "u" + strconv.Itoa(int(c.Sample.UtilPercent+5)/10)
}

// Util is the utilisation in words: "73%", "" without telemetry.
func (c gpuCell) Util() string {
	if c.Sample == nil || c.Sample.Has&gpu.HasUtil == 0 {
		return ""
	}
	return fmt.Sprintf("%.0f%%", c.Sample.UtilPercent)
}

// Title is the GPU in one line, for its cell's tooltip.
func (c gpuCell) Title() string {
	s := fmt.Sprintf("GPU %d %s: %s", c.GPU.Index, c.GPU.Model, c.State)
	if c.Job != "" {
		s += " by job " + structs.ShortID(c.Job)
	}
	if ok, why := c.GPU.Placeable(); !ok {
		s += " (" + why + ")"
	}
	if u := c.Util(); u != "" {
		s += ", " + u + " busy"
	}
	return s
}

// nodeRows builds the rows of nodes, with the GPUs each live allocation
// holds and this node's telemetry: the overview asks no other node.
func (u *UI) nodeRows(nodes []*structs.Node) []nodeRow {
	leader := u.srv.Leader()
	samples := u.samples()
	rows := make([]nodeRow, 0, len(nodes))
	for _, n := range nodes {
		var own map[int]gpu.Sample
		if n.ID == u.cfg.NodeID {
			own = samples
		}
		rows = append(rows, u.nodeRow(n, leader, own))
	}
	return rows
}

// nodePageRow is the row of the node a node's or GPU's page shows, with
// its GPUs' telemetry: this node's own, or another's asked of it.
func (u *UI) nodePageRow(r *http.Request, n *structs.Node) nodeRow {
	if n.ID == u.cfg.NodeID {
		return u.nodeRow(n, u.srv.Leader(), u.samples())
	}
	samples, why := u.nodeTelemetry(r.Context(), n)
	row := u.nodeRow(n, u.srv.Leader(), samples)
	row.NoTelemetry = why
	return row
}

// nodeTelemetry asks another node for its GPUs' latest telemetry, for
// at most telemetryWait; nil, and why in words, without it. A node that
// is not up is not asked: the page must not wait on a dead node.
func (u *UI) nodeTelemetry(ctx context.Context, n *structs.Node) (map[int]gpu.Sample, string) {
	switch {
	case len(n.GPUs) == 0:
		return nil, ""
	case u.srv.NodeTelemetry == nil:
		return nil, "the utilisation of " + n.Name + "'s GPUs is read on " + n.Name
	case n.Status != structs.NodeReady && n.Status != structs.NodeDraining:
		return nil, fmt.Sprintf("%s is %s: its telemetry is not asked for", n.Name, n.Status)
	}
	ctx, cancel := context.WithTimeout(ctx, u.telemetryWait)
	defer cancel()
	got, err := u.srv.NodeTelemetry(ctx, n.ID)
	switch {
	case ctx.Err() != nil:
		return nil, fmt.Sprintf("%s did not answer with its telemetry within %s", n.Name, u.telemetryWait)
	case err != nil:
		return nil, fmt.Sprintf("%s could not be asked for it: %v", n.Name, err)
	case len(got) == 0:
		return nil, n.Name + " reads no GPU telemetry"
	}
	return byIndex(got), ""
}

// nodeRow is n's row, with the GPUs each live allocation holds and the
// telemetry given (nil: none).
func (u *UI) nodeRow(n *structs.Node, leader string, samples map[int]gpu.Sample) nodeRow {
	holder := map[string]string{}
	live := u.cfg.FSM.NodeLiveAllocs(n.ID)
	for _, a := range live {
		for _, g := range a.GPUs {
			holder[g] = a.JobID
		}
	}
	row := nodeRow{Node: n, Leader: n.ID == leader, Local: n.ID == u.cfg.NodeID, Live: len(live), HasTelemetry: samples != nil}
	for _, g := range n.GPUs {
		c := gpuCell{GPU: g, Job: holder[g.UUID]}
		switch c.State = g.HealthState(); {
		case c.Job != "":
			c.State = gpuUsed
			row.Used++
		case c.State == gpuUnhealthy:
			row.Unhealthy++
		case c.State != structs.GPUHealthy:
			row.HeldBack++
		default:
			c.State = gpuFree
			row.Free++
		}
		if s, ok := samples[g.Index]; ok {
			c.Sample = &s
		}
		row.GPUs = append(row.GPUs, c)
	}
	return row
}

// samples is this node's latest telemetry by GPU index; nil without.
func (u *UI) samples() map[int]gpu.Sample {
	if u.cfg.Telemetry == nil {
		return nil
	}
	got := u.cfg.Telemetry.Sample()
	if got == nil {
		return nil
	}
	return byIndex(got)
}

// byIndex keys samples by their GPU's index.
func byIndex(samples []gpu.Sample) map[int]gpu.Sample {
	out := make(map[int]gpu.Sample, len(samples))
	for _, s := range samples {
		out[s.Index] = s
	}
	return out
}

// totals sums the rows' GPUs, counting only ready nodes' free GPUs as free.
type totals struct {
	Nodes, NodesReady                   int
	GPUs, Free, Used, Unhealthy, Others int
}

func sum(rows []nodeRow) totals {
	var t totals
	for _, r := range rows {
		t.Nodes++
		ready := r.Node.Status == structs.NodeReady
		if ready {
			t.NodesReady++
			t.Free += r.Free
		} else {
			t.Others += r.Free
		}
		t.GPUs += len(r.GPUs)
		t.Used += r.Used
		t.Unhealthy += r.Unhealthy
		t.Others += r.HeldBack
	}
	return t
}

type stateCount struct {
	State structs.JobState
	N     int
}

type overviewData struct {
	Leader    string
	Totals    totals
	Nodes     []nodeRow
	Jobs      []stateCount
	Queue     []queueRow
	QueueSize int
}

func (u *UI) handleOverview(w http.ResponseWriter, r *http.Request, v *view) {
	v.Title, v.Nav, v.Refresh = "Cluster", "overview", refreshSeconds
	rows := u.nodeRows(u.cfg.FSM.Nodes())
	d := overviewData{Nodes: rows, Totals: sum(rows), Leader: "none"}
	for _, row := range rows {
		if row.Leader {
			d.Leader = row.Node.Name
		}
	}
	counts := u.cfg.FSM.JobCounts()
	for _, st := range structs.JobStates {
		d.Jobs = append(d.Jobs, stateCount{st, counts[st]})
	}
	d.Queue, d.QueueSize, _ = u.queuePage(0, overviewHead, v)
	u.render(w, http.StatusOK, "overview", v, d)
}

type nodeData struct {
	Row    nodeRow
	Allocs []*structs.Allocation
	// MayCordon shows the cordon buttons, which post CSRF.
	MayCordon bool
	CSRF      string
	// Events are the node's latest events, oldest first.
	Events []structs.Event
}

// findNode is the node /ui/nodes/KEY names: KEY its ID, its name (as
// people type it, and as the CLI prints it) or a unique prefix of its ID.
func (u *UI) findNode(key string) (*structs.Node, bool) {
	if n, ok := u.cfg.FSM.Node(key); ok {
		return n, true
	}
	var byPrefix []*structs.Node
	for _, n := range u.cfg.FSM.Nodes() {
		if n.Name == key {
			return n, true
		}
		if key != "" && strings.HasPrefix(n.ID, key) {
			byPrefix = append(byPrefix, n)
		}
	}
	if len(byPrefix) == 1 {
		return byPrefix[0], true
	}
	return nil, false
}

func (u *UI) handleNode(w http.ResponseWriter, r *http.Request, v *view) {
	n, ok := u.findNode(r.PathValue("id"))
	if !ok {
		u.fail(w, r, v, http.StatusNotFound, fmt.Errorf("node %s: no such node", r.PathValue("id")))
		return
	}
	v.Title, v.Nav, v.Refresh = "Node "+n.Name, "overview", refreshSeconds
	d := nodeData{Row: u.nodePageRow(r, n), Allocs: u.cfg.FSM.NodeLiveAllocs(n.ID), MayCordon: v.Viewer.Can(structs.PermNodes), CSRF: v.CSRF,
		Events: u.cfg.FSM.RecentEvents("", n.ID, recentEvents)}
	u.render(w, http.StatusOK, "node", v, d)
}

type gpuData struct {
	Node      nodeRow
	Cell      gpuCell
	MayCordon bool
	CSRF      string
	// Placeable and Why say whether new work may go to the GPU.
	Placeable bool
	Why       string
}

func (u *UI) handleGPU(w http.ResponseWriter, r *http.Request, v *view) {
	n, ok := u.findNode(r.PathValue("id"))
	index, err := strconv.Atoi(r.PathValue("index"))
	if !ok || err != nil {
		u.fail(w, r, v, http.StatusNotFound, fmt.Errorf("GPU %s of node %s: no such GPU", r.PathValue("index"), r.PathValue("id")))
		return
	}
	row := u.nodePageRow(r, n)
	for _, c := range row.GPUs {
		if c.GPU.Index != index {
			continue
		}
		v.Title, v.Nav, v.Refresh = fmt.Sprintf("GPU %d of %s", index, n.Name), "overview", refreshSeconds
		d := gpuData{Node: row, Cell: c, MayCordon: v.Viewer.Can(structs.PermNodes), CSRF: v.CSRF}
		d.Placeable, d.Why = c.GPU.Placeable()
		u.render(w, http.StatusOK, "gpu", v, d)
		return
	}
	u.fail(w, r, v, http.StatusNotFound, fmt.Errorf("GPU %d of node %s: no such GPU", index, n.Name))
}

// handleCordon cordons or uncordons a GPU through the API (which passes
// it to the leader), then shows the GPU again.
func (u *UI) handleCordon(w http.ResponseWriter, r *http.Request, v *view) {
	id, index := r.PathValue("id"), r.PathValue("index")
	i, err := strconv.Atoi(index)
	if err != nil {
		u.fail(w, r, v, http.StatusBadRequest, fmt.Errorf("GPU index %q: %w", index, errBadNumber))
		return
	}
	action := "cordon"
	if r.URL.Path == Prefix+"nodes/"+id+"/gpus/"+index+"/uncordon" {
		action = "uncordon"
	}
	body, err := json.Marshal(api.GPURequest{Node: id, Index: i, Reason: r.PostFormValue("reason")})
	if err == nil {
		err = u.act(r, http.MethodPost, "/v1/gpus/"+action, body)
	}
	if err != nil {
		u.fail(w, r, v, statusOf(err), err)
		return
	}
	http.Redirect(w, r, Prefix+"nodes/"+id+"/gpus/"+index, http.StatusSeeOther)
}
