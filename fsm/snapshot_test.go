package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/structs"
)

// richState builds an FSM holding every record type, every job state and
// every allocation state.
func richState(t *testing.T) *harness {
	h := newHarness(t)
	n1 := node("n1", 4)
	n1.Labels = map[string]string{"rack": "r1", "zone": "a"}
	n1.Addresses = structs.Addresses{HTTP: "10.0.0.1:7470", Raft: "10.0.0.1:7471", Gossip: "10.0.0.1:7472"}
	n1.GPUs[0].NVLinkPeers = []int{1, 2, 3}
	n1.GPUs[3].Healthy, n1.GPUs[3].Reason = false, "XID 79"
	n1.GPUSource, n1.Version = "simulated", "0.1.0"
	n1.LinkMbps, n1.MasterPorts = 100000, structs.PortRange{Min: 29000, Max: 29999}
	h.register(n1)
	n2 := node("n2", 2)
	n2.Containers = &structs.ContainerEngine{Engine: "docker 20.10.21", APIVersion: "1.41", GPUs: true,
		Images: []string{"busybox:latest"}, AllowMounts: []string{"/data"}}
	h.register(n2)
	n3 := node("n3", 0)
	n3.Status = structs.NodeDown
	h.register(n3)

	s := spec(1, 1)
	s.Env = map[string]string{"A": "1"}
	s.TimeLimit = structs.Duration(time.Hour)
	s.Constraints = map[string]string{"rack": "r1"}
	s.Name, s.Singleton = "nightly", true
	h.apply(structs.JobSubmitType, structs.JobSubmitRequest{RequestID: "req-1", JobID: "queued", Spec: s, SubmittedAt: t0})
	h.plan(structs.Plan{Blocked: []structs.JobBlocked{{JobID: "queued", Reason: "waiting"}}})

	whole := spec(2, 1)
	whole.Exclusive = true
	h.submit("ok", whole)
	h.place("ok", alloc("ok0", "n1", 0, gpuID("n1", 0)), alloc("ok1", "n2", 1, gpuID("n2", 0)))
	h.mustUpdate("n1", "ok0", structs.AllocRunning, 0, "")
	h.mustUpdate("n1", "ok0", structs.AllocSucceeded, 0, "")
	h.mustUpdate("n2", "ok1", structs.AllocSucceeded, 0, "")

	h.submit("bad", spec(1, 0))
	h.place("bad", alloc("bad0", "n2", 0))
	h.mustUpdate("n2", "bad0", structs.AllocLost, -1, "node n2 down")

	h.submit("gone", spec(1, 0))
	h.apply(structs.JobCancelType, structs.JobCancelRequest{JobID: "gone", Reason: "typo", At: h.at()})

	h.submit("run", spec(1, 2))
	h.place("run", withPort(29517, alloc("run0", "n1", 0, gpuID("n1", 1), gpuID("n1", 2)))...)
	h.mustUpdate("n1", "run0", structs.AllocRunning, 0, "")

	h.submit("stop", spec(1, 1))
	h.place("stop", alloc("stop0", "n2", 0, gpuID("n2", 1)))
	h.apply(structs.JobCancelType, structs.JobCancelRequest{JobID: "stop", At: h.at()})

	h.submit("killed", spec(1, 0))
	h.place("killed", alloc("killed0", "n1", 0))
	h.mustUpdate("n1", "killed0", structs.AllocKilled, 137, "killed: node drained")

	img := spec(1, 0)
	img.Image, img.ImagePull, img.ShmSizeMiB = "nvcr.io/nvidia/pytorch:24.01-py3", structs.PullAlways, 64<<10
	img.Mounts = []structs.Mount{{Source: "/data", Target: "/data", ReadOnly: true}}
	h.submit("pull", img)
	h.place("pull", alloc("pull0", "n2", 0))
	h.apply(structs.AllocUpdateType, structs.AllocUpdateRequest{NodeID: "n2", Updates: []structs.AllocUpdate{
		{AllocID: "pull0", State: structs.AllocPending, At: h.at(),
			Pull: &structs.PullProgress{Image: img.Image, Bytes: 1 << 30, Total: 5 << 30, At: h.at()}},
	}})

	late := spec(1, 0)
	late.TimeLimit = structs.Duration(time.Hour)
	late.Signal = &structs.TimeSignal{Name: "USR1", Before: structs.Duration(time.Minute)}
	h.apply(structs.JobSubmitType, structs.JobSubmitRequest{JobID: "late", Spec: late, SubmittedAt: t0})
	h.place("late", alloc("late0", "n1", 0))
	h.mustUpdate("n1", "late0", structs.AllocTimedOut, 143, "time limit 1h0m0s exceeded")
	return h
}

func TestFSM_SnapshotRoundTripsEveryRecord(t *testing.T) {
	h := richState(t)
	counts := h.f.JobCounts()
	for st, n := range counts {
		if n == 0 {
			t.Fatalf("rich state has no %s job", st)
		}
	}
	g := restoreFresh(t, h.f)
	if g.Hash() != h.f.Hash() || g.Index() != h.f.Index() {
		t.Fatalf("restored hash/index %s/%d, want %s/%d", g.Hash(), g.Index(), h.f.Hash(), h.f.Index())
	}
	if !reflect.DeepEqual(g.Nodes(), h.f.Nodes()) || !reflect.DeepEqual(g.Jobs(), h.f.Jobs()) || !reflect.DeepEqual(g.State(), h.f.State()) {
		t.Fatal("restored queries differ from the original")
	}
	for _, j := range h.f.Jobs() {
		if !reflect.DeepEqual(g.Allocs(j.ID), h.f.Allocs(j.ID)) {
			t.Fatalf("restored allocs of %s differ", j.ID)
		}
	}
	if err := checkIndexes(g.st); err != nil {
		t.Fatalf("restored indexes: %v", err)
	}
	if a, _ := g.Alloc("pull0"); a == nil || a.Pull == nil || a.Pull.Bytes != 1<<30 {
		t.Fatalf("restored pulling allocation %+v lost its pull progress", a)
	}
	if got, ok := g.JobByRequestID("req-1"); !ok || got.ID != "queued" || !got.Spec.Singleton {
		t.Fatal("restored FSM lost the request id index, or the job's singleton")
	}
	if a, _ := g.Alloc("ok1"); a == nil || !a.Exclusive {
		t.Fatalf("restored allocation %+v of an --exclusive job lost Exclusive", a)
	}

	// Both go on identically: the restored indexes hold the same GPUs.
	other := &harness{t: t, f: g, idx: h.idx}
	for _, x := range []*harness{h, other} {
		x.submit("next", spec(1, 1))
		res := x.plan(structs.Plan{Placements: []structs.JobPlacement{
			{JobID: "next", Allocations: []structs.Allocation{alloc("next0", "n1", 0, gpuID("n1", 1))}},
		}})
		if len(res.Rejected) != 1 {
			t.Fatalf("GPU held by run0 was placed again: %+v", res)
		}
		x.mustUpdate("n2", "stop0", structs.AllocKilled, 143, "")
	}
	if g.Hash() != h.f.Hash() {
		t.Fatal("original and restored FSM diverged after the same entries")
	}
	if j, _ := g.Job("stop"); j.State != structs.JobCancelled {
		t.Fatalf("restored stopping job did not end: %s", j.State)
	}
}

func TestFSM_SnapshotFormat(t *testing.T) {
	h := richState(t)
	lines := strings.Split(strings.TrimSuffix(string(snapshotBytes(t, h.f)), "\n"), "\n")
	// A state that has given job numbers is version 9.
	if want := fmt.Sprintf(`{"version":9,"index":%d}`, h.idx); lines[0] != want {
		t.Fatalf("header %s, want %s", lines[0], want)
	}
	var types []string
	for _, l := range lines[1:] {
		typ := strings.TrimPrefix(strings.SplitN(l, ",", 2)[0], `{"type":`)
		if len(types) == 0 || types[len(types)-1] != typ {
			types = append(types, typ)
		}
	}
	if want := []string{`"node"`, `"job"`, `"alloc"`, `"job_numbers"`, `"event_log"`, `"event"`}; !slices.Equal(types, want) {
		t.Fatalf("record types in order %v, want %v", types, want)
	}
	if !bytes.Equal(snapshotBytes(t, h.f), snapshotBytes(t, h.f)) {
		t.Fatal("two snapshots of the same state differ")
	}
}

func TestFSM_Restore_RejectsBadSnapshotsAndKeepsState(t *testing.T) {
	const hdr = `{"version":1,"index":9}` + "\n"
	node := `{"type":"node","node":{"id":"n1","gpus":[{"uuid":"G1","healthy":true}]}}` + "\n"
	job := `{"type":"job","job":{"id":"j1","request_id":"r","state":"running","spec":{"command":["x"],"nodes":1}}}` + "\n"
	cases := []struct {
		name, data, want string
	}{
		{"empty", "", "header"},
		{"garbage", "\x00\x01garbage", "header"},
		{"unknown version", `{"version":99,"index":9}`, "version 99, want 1 to 9"},
		{"missing version", `{"index":9}`, "version 0, want 1 to 9"},
		{"unknown record type", hdr + `{"type":"volume"}`, `record 1: unknown record type "volume"`},
		{"truncated record", hdr + node + `{"type":"job","job":{"id"`, "record 2"},
		{"record without body", hdr + `{"type":"node"}`, "node record without node id"},
		{"node twice", hdr + node + node, "node n1 twice"},
		{"job twice", hdr + job + job, "job j1 twice"},
		{"request id twice", hdr + job + strings.Replace(job, `"j1"`, `"j2"`, 1), "request id r used by two jobs"},
		{"job number twice", hdr + strings.Replace(job, `"id":"j1"`, `"id":"j1","number":4`, 1) +
			strings.Replace(strings.Replace(job, `"j1","request_id":"r"`, `"j2"`, 1), `"id":"j2"`, `"id":"j2","number":4`, 1),
			"job number 4 used by two jobs"},
		{"job numbers in version 6", `{"version":6,"index":9}` + "\n" + `{"type":"job_numbers","job_numbers":{"last":3}}`,
			"job_numbers record in a version 6 snapshot"},
		{"partition twice", `{"version":9,"index":9}` + "\n" + `{"type":"partition","partition":{"name":"gpu"}}` + "\n" +
			`{"type":"partition","partition":{"name":"gpu"}}`, "partition gpu twice"},
		{"bad partition", `{"version":9,"index":9}` + "\n" + `{"type":"partition","partition":{"name":"gpu","max_nodes":-2}}`, "partition gpu: max_nodes"},
		{"job numbers twice", `{"version":9,"index":9}` + "\n" + `{"type":"job_numbers","job_numbers":{"last":3}}` + "\n" +
			`{"type":"job_numbers","job_numbers":{"last":3}}`, "job numbers twice"},
		{"alloc of unknown job", hdr + `{"type":"alloc","alloc":{"id":"a","job_id":"j9","state":"running"}}`, "alloc a of unknown job j9"},
		{"GPU held twice", hdr + node + job +
			`{"type":"alloc","alloc":{"id":"a","job_id":"j1","node_id":"n1","gpus":["G1"],"state":"running"}}` + "\n" +
			`{"type":"alloc","alloc":{"id":"b","job_id":"j1","node_id":"n1","gpus":["G1"],"state":"pending"}}`,
			"GPU G1 held by allocs a and b"},
	}
	h := richState(t)
	before, idx := h.f.Hash(), h.f.Index()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := h.f.Restore(readCloser([]byte(tc.data)))
			wantErrIs(t, err, ErrBadSnapshot, tc.want)
			if h.f.Hash() != before || h.f.Index() != idx {
				t.Fatal("a refused restore changed state")
			}
		})
	}
}

func TestFSM_Restore_ReplacesState(t *testing.T) {
	h := richState(t)
	empty := New(nil)
	if err := h.f.Restore(readCloser(snapshotBytes(t, empty))); err != nil {
		t.Fatalf("restore empty: %v", err)
	}
	if len(h.f.Nodes()) != 0 || len(h.f.Jobs()) != 0 || len(h.f.State().LiveAllocs) != 0 || h.f.Index() != 0 {
		t.Fatal("restore kept old state")
	}
}

func TestFSM_PersistCancelsSinkOnWriteError(t *testing.T) {
	h := richState(t)
	snap, err := h.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := &failingSink{}
	if err := snap.Persist(sink); !errors.Is(err, errDiskFull) {
		t.Fatalf("persist error %v, want %v", err, errDiskFull)
	}
	if !sink.cancelled || sink.closed {
		t.Fatalf("sink cancelled %v closed %v, want cancelled only", sink.cancelled, sink.closed)
	}
}

var errDiskFull = errors.New("disk full")

type failingSink struct{ memSink }

func (s *failingSink) Write([]byte) (int, error) { return 0, errDiskFull }

// checkIndexes compares the derived indexes of s with ones built afresh from
// its nodes, jobs and allocations.
func checkIndexes(s *state) error {
	want := newState()
	for id, n := range s.nodes {
		if n.Drain != nil {
			want.draining[id] = true
		}
	}
	for _, j := range s.jobs {
		want.addJob(j)
	}
	for _, id := range slices.Sorted(maps.Keys(s.allocs)) {
		want.addAlloc(s.allocs[id])
	}
	jobAllocs := func(st *state) map[string][]string {
		out := map[string][]string{}
		for k, v := range st.jobAllocs {
			out[k] = allocIDs(v)
			slices.Sort(out[k])
		}
		return out
	}
	switch {
	case !maps.Equal(s.jobByRequest, want.jobByRequest):
		return errors.New("request id index differs")
	case !reflect.DeepEqual(jobAllocs(s), jobAllocs(want)):
		return errors.New("job allocs index differs")
	case !sameSets(s.nodeAllocs, want.nodeAllocs):
		return fmt.Errorf("node allocs index %v, want %v", setIDs(s.nodeAllocs), setIDs(want.nodeAllocs))
	case !sameSets(s.nodeLive, want.nodeLive):
		return fmt.Errorf("node live allocs index %v, want %v", setIDs(s.nodeLive), setIDs(want.nodeLive))
	case !maps.Equal(s.live, want.live):
		return errors.New("live index differs")
	case !maps.Equal(s.gpuHolder, want.gpuHolder):
		return fmt.Errorf("GPU holders %v, want %v", s.gpuHolder, want.gpuHolder)
	case !maps.Equal(s.nodeUsed, want.nodeUsed):
		return fmt.Errorf("node usage %v, want %v", s.nodeUsed, want.nodeUsed)
	case !maps.Equal(s.portHolder, want.portHolder):
		return fmt.Errorf("master port holders %v, want %v", s.portHolder, want.portHolder)
	case !maps.Equal(s.numberJobs, want.numberJobs):
		return fmt.Errorf("job numbers %v, want %v", s.numberJobs, want.numberJobs)
	case !maps.Equal(s.arrayNumbers, want.arrayNumbers):
		return fmt.Errorf("array numbers %v, want %v", s.arrayNumbers, want.arrayNumbers)
	case !sameSets(s.arrayTasks, want.arrayTasks):
		return fmt.Errorf("array tasks %v, want %v", setIDs(s.arrayTasks), setIDs(want.arrayTasks))
	case !sameSets(s.serviceJobs, want.serviceJobs):
		return fmt.Errorf("service jobs %v, want %v", setIDs(s.serviceJobs), setIDs(want.serviceJobs))
	case !sameSets(s.dependents, want.dependents):
		return fmt.Errorf("dependents %v, want %v", setIDs(s.dependents), setIDs(want.dependents))
	case !maps.Equal(s.queued, want.queued):
		return fmt.Errorf("queued jobs %v, want %v", slices.Sorted(maps.Keys(s.queued)), slices.Sorted(maps.Keys(want.queued)))
	case !maps.Equal(s.ownerQueued, want.ownerQueued):
		return fmt.Errorf("owner queued counts %v, want %v", s.ownerQueued, want.ownerQueued)
	case !maps.Equal(s.ownerGPUs, want.ownerGPUs):
		return fmt.Errorf("owner GPU counts %v, want %v", s.ownerGPUs, want.ownerGPUs)
	case !maps.Equal(s.draining, want.draining):
		return fmt.Errorf("draining nodes %v, want %v", s.draining, want.draining)
	}
	return checkOwnerCounters(s)
}

// sameSets reports whether two set indexes hold the same objects under the
// same keys.
func sameSets[S ~map[string]*V, V any](a, b map[string]S) bool {
	return maps.EqualFunc(a, b, func(x, y S) bool { return maps.Equal(x, y) })
}

// setIDs lists the IDs in each set of an index, sorted, for messages.
func setIDs[S ~map[string]V, V any](index map[string]S) map[string][]string {
	out := map[string][]string{}
	for k, set := range index {
		out[k] = slices.Sorted(maps.Keys(set))
	}
	return out
}
