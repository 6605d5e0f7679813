package sched

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/structs"
)

// withEngine gives a node a container engine that answers, can hand out
// GPUs when gpus is set, allows mounts under allow, and holds images.
func withEngine(gpus bool, allow []string, images ...string) func(*structs.Node) {
	return func(n *structs.Node) {
		n.Containers = &structs.ContainerEngine{Engine: "docker 20.10.21", APIVersion: "1.41", GPUs: gpus,
			AllowMounts: allow, Images: images}
	}
}

// withEngineDown gives a node a container engine that did not answer.
func withEngineDown(n *structs.Node) {
	n.Containers = &structs.ContainerEngine{Error: "connect: no such file or directory"}
}

func simulated(n *structs.Node) { n.GPUSource = "simulated" }

// allowingCaps lets a node's engine (withEngine first) give containers caps.
func allowingCaps(caps ...string) func(*structs.Node) {
	return func(n *structs.Node) { n.Containers.AllowCaps = caps }
}

// withCaps makes a job ask for capabilities.
func withCaps(caps ...string) func(*structs.JobSpec) {
	return func(s *structs.JobSpec) { s.Caps = caps }
}

// image makes a job run in a container of ref with the mounts.
func image(ref string, mounts ...string) func(*structs.JobSpec) {
	return func(s *structs.JobSpec) {
		s.Image = ref
		for _, m := range mounts {
			mt, err := structs.ParseMount(m)
			if err != nil {
				panic(err)
			}
			s.Mounts = append(s.Mounts, mt)
		}
	}
}

func TestPlace_ImageJobRunsOnlyWhereItsContainerCan(t *testing.T) {
	data := []string{"/data"}
	cases := []struct {
		name  string
		nodes []*structs.Node
		job   *structs.Job
		want  string // the node it is placed on, or "" to be blocked
		why   string // the blocked reason
	}{
		{"no engine probed", []*structs.Node{gpuNode("n1", 8, "A100", 80)}, job("j", 1, image("busybox")),
			"", "1 node: no container engine"},
		{"engine that did not answer", []*structs.Node{gpuNode("n1", 8, "A100", 80, withEngineDown)}, job("j", 1, image("busybox")),
			"", "1 node: container engine not answering"},
		{"engine without GPUs for a GPU job", []*structs.Node{gpuNode("n1", 8, "A100", 80, withEngine(false, nil))},
			job("j", 1, image("busybox")), "", "1 node: container engine cannot hand out NVIDIA GPUs"},
		{"engine without GPUs for a CPU job", []*structs.Node{gpuNode("n1", 8, "A100", 80, withEngine(false, nil))},
			job("j", 0, image("busybox")), "n1", ""},
		{"simulated GPUs need nothing of the engine", []*structs.Node{gpuNode("n1", 8, "A100", 80, simulated, withEngine(false, nil))},
			job("j", 2, image("busybox")), "n1", ""},
		{"mount not allowed", []*structs.Node{gpuNode("n1", 8, "A100", 80, withEngine(true, data))},
			job("j", 1, image("busybox", "/data:/d", "/database:/db:ro")), "", "1 node: mount /database not under the node's allow_mounts"},
		{"mount allowed below a directory", []*structs.Node{gpuNode("n1", 8, "A100", 80, withEngine(true, data))},
			job("j", 1, image("busybox", "/data/team/x:/x:ro", "/data:/data")), "n1", ""},
		{"a job without an image needs no engine", []*structs.Node{gpuNode("n1", 8, "A100", 80)}, job("j", 1),
			"n1", ""},
		{"a capability not allowed", []*structs.Node{gpuNode("n1", 8, "A100", 80, withEngine(true, nil), allowingCaps("CHOWN"))},
			job("j", 1, image("busybox"), withCaps("CHOWN", "NET_ADMIN")), "", "1 node: capability NET_ADMIN not in the node's allow_caps"},
		{"only where the capabilities are allowed", []*structs.Node{
			gpuNode("n1", 8, "A100", 80, withEngine(true, nil)),
			gpuNode("n2", 8, "A100", 80, withEngine(true, nil), allowingCaps("NET_ADMIN")),
			gpuNode("n3", 8, "A100", 80, withEngine(true, nil), allowingCaps("CHOWN", "NET_ADMIN")),
		}, job("j", 1, image("busybox"), withCaps("CHOWN", "NET_ADMIN")), "n3", ""},
		{"only the node that can", []*structs.Node{
			gpuNode("n1", 8, "A100", 80),
			gpuNode("n2", 8, "A100", 80, withEngineDown),
			gpuNode("n3", 8, "A100", 80, withEngine(false, data)),
			gpuNode("n4", 8, "A100", 80, withEngine(true, []string{"/scratch"})),
			gpuNode("n5", 8, "A100", 80, withEngine(true, []string{"/scratch", "/data"})),
		}, job("j", 4, image("busybox", "/data/x:/x")), "n5", ""},
		{"every reason counted", []*structs.Node{
			gpuNode("n1", 8, "A100", 80),
			gpuNode("n2", 8, "A100", 80),
			gpuNode("n3", 8, "A100", 80, withEngineDown),
			gpuNode("n4", 8, "A100", 80, withEngine(false, data)),
			gpuNode("n5", 8, "A100", 80, withEngine(true, []string{"/scratch"})),
			gpuNode("n6", 8, "A100", 80, withEngine(true, []string{"/scratch"}), withStatus(structs.NodeDown)),
		}, job("j", 4, image("busybox", "/data/x:/x")), "",
			"2 nodes: no container engine; 1 node: container engine cannot hand out NVIDIA GPUs; " +
				"1 node: container engine not answering; 1 node: mount /data/x not under the node's allow_mounts; 1 node: node down"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, pass := range []struct {
				name string
				plan func() structs.Plan
			}{
				{"Place", func() structs.Plan { return Place(fakeState{nodes: tc.nodes}, []*structs.Job{tc.job}) }},
				{"Schedule", func() structs.Plan {
					return Schedule(fakeState{nodes: tc.nodes}, []*structs.Job{tc.job}, Options{Now: time.Unix(1e9, 0)})
				}},
			} {
				p := pass.plan()
				got := placedOn(p, "j")
				switch {
				case tc.want != "" && (len(got) != 1 || !strings.HasPrefix(got[0], tc.want+":")):
					t.Errorf("%s placed the job on %v (blocked: %q), want %s", pass.name, got, blockedReason(p, "j"), tc.want)
				case tc.want == "" && (got != nil || blockedReason(p, "j") != tc.why):
					t.Errorf("%s placed the job on %v, blocked %q; want it blocked with %q", pass.name, got, blockedReason(p, "j"), tc.why)
				}
			}
		})
	}
}

func TestPlace_PrefersANodeThatHoldsTheImageWhenOtherwiseEqual(t *testing.T) {
	nodes := []*structs.Node{
		gpuNode("n1", 8, "A100", 80, withEngine(true, nil, "pytorch:24.01")),
		gpuNode("n2", 8, "A100", 80, withEngine(true, nil, "busybox:latest", "pytorch:25.01")),
		gpuNode("n3", 8, "A100", 80, withEngine(true, nil)),
	}
	cases := []struct {
		name string
		job  *structs.Job
		want string
	}{
		{"a node with the image wins over a lower node ID", job("j", 2, image("pytorch:25.01")), "n2"},
		{"an untagged image is the one tagged latest", job("j", 2, image("busybox")), "n2"},
		{"another tag is another image", job("j", 2, image("pytorch:23.01")), "n1"},
		{"a gang goes to the holders first", job("j", 2, image("pytorch:25.01"), gang(2)), "n2"},
		{"spread too", job("j", 2, image("pytorch:25.01"), spreadOut), "n2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, p := range []structs.Plan{
				Place(fakeState{nodes: nodes}, []*structs.Job{tc.job}),
				Schedule(fakeState{nodes: nodes}, []*structs.Job{tc.job}, Options{Now: time.Unix(1e9, 0)}),
			} {
				got := placedOn(p, "j")
				if len(got) == 0 || !strings.HasPrefix(got[0], tc.want+":") {
					t.Fatalf("rank 0 placed on %v, want %s", got, tc.want)
				}
			}
		})
	}
}

func TestPlace_HoldingTheImageOnlyBreaksTiesOfTheScore(t *testing.T) {
	// n1 holds the image but would keep 6 GPUs free; n2 fits the job
	// exactly. Binpack wins: the pull costs once, a broken-up node every
	// large job after.
	nodes := []*structs.Node{
		gpuNode("n1", 8, "A100", 80, withEngine(true, nil, "pytorch:24.01")),
		gpuNode("n2", 2, "A100", 80, withEngine(true, nil)),
	}
	p := Place(fakeState{nodes: nodes}, []*structs.Job{job("j", 2, image("pytorch:24.01"))})
	if got := placedOn(p, "j"); len(got) != 1 || !strings.HasPrefix(got[0], "n2:") {
		t.Fatalf("placed on %v, want the exact fit n2", got)
	}
	// With spread, n1 is the better score and holds the image as well.
	p = Place(fakeState{nodes: nodes}, []*structs.Job{job("j", 2, image("pytorch:24.01"), spreadOut)})
	if got := placedOn(p, "j"); len(got) != 1 || !strings.HasPrefix(got[0], "n1:") {
		t.Fatalf("spread placed on %v, want n1", got)
	}
}

func TestPlace_ImageJobsOfOneShapeWithOtherMountsAreJudgedApart(t *testing.T) {
	// Two image jobs alike but for their mounts: the first is blocked,
	// the second must not get its reason from the blocked-shape memory.
	nodes := []*structs.Node{gpuNode("n1", 8, "A100", 80, withEngine(true, []string{"/data"}))}
	p := Place(fakeState{nodes: nodes}, []*structs.Job{
		job("a", 1, image("busybox", "/etc:/etc")),
		job("b", 1, image("busybox", "/data:/data")),
	})
	if got := blockedReason(p, "a"); got != "1 node: mount /etc not under the node's allow_mounts" {
		t.Errorf("job a blocked with %q", got)
	}
	if got := placedOn(p, "b"); len(got) != 1 {
		t.Errorf("job b placed on %v (blocked %q), want n1", got, blockedReason(p, "b"))
	}
}

func TestSchedule_ReservationForAnImageJobSkipsNodesWithoutAnEngine(t *testing.T) {
	// The head needs a container engine: only n2 could ever run it, so its
	// reservation is on n2 and n1 stays free for the job behind it.
	nodes := []*structs.Node{
		gpuNode("n1", 8, "A100", 80),
		gpuNode("n2", 8, "A100", 80, withEngine(true, nil)),
	}
	busy := running("busy", "n2", 0, 0, "n2-g0", "n2-g1", "n2-g2", "n2-g3", "n2-g4", "n2-g5", "n2-g6", "n2-g7")
	now := time.Unix(1e9, 0)
	head := job("head", 8, image("busybox"))
	head.SubmittedAt = now.Add(-time.Hour)
	later := job("later", 8)
	later.SubmittedAt = now
	p := Schedule(fakeState{nodes: nodes, allocs: []*structs.Allocation{busy}, limits: map[string]time.Duration{"busy": time.Hour}},
		[]*structs.Job{head, later}, Options{Now: now})
	if r := blockedReason(p, "head"); !strings.Contains(r, "first in line: 8 GPUs on 1 node reserved") ||
		!strings.Contains(r, "1 node: no container engine") {
		t.Errorf("head blocked with %q, want a reservation and the node without an engine counted", r)
	}
	if got := placedOn(p, "later"); len(got) != 1 || !strings.HasPrefix(got[0], "n1:") {
		t.Errorf("later placed on %v (blocked %q), want n1", got, blockedReason(p, "later"))
	}
}

func TestPreemptions_NoVictimOnANodeTheImageJobCannotUse(t *testing.T) {
	nodes := []*structs.Node{gpuNode("n1", 2, "A100", 80)}
	victim := &structs.Job{ID: "v", State: structs.JobRunning, Spec: structs.JobSpec{GPUs: 2, Nodes: 1, Preemptible: true}}
	live := []*structs.Allocation{running("v", "n1", 0, 0, "n1-g0", "n1-g1")}
	s := fakeState{nodes: nodes, allocs: live}
	want := job("j", 2, func(s *structs.JobSpec) { s.Priority = 10 })
	if got := Preemptions(s, want, []*structs.Job{victim}); !slices.Equal(got, []string{"v"}) {
		t.Fatalf("a process job preempts %v, want [v]", got)
	}
	img := job("j", 2, image("busybox"), func(s *structs.JobSpec) { s.Priority = 10 })
	if got := Preemptions(s, img, []*structs.Job{victim}); got != nil {
		t.Fatalf("an image job preempts %v on a node without a container engine, want nothing", got)
	}
}

func TestCheckFits_ImageJobNeedsAnEngineGPUsMountsAndCaps(t *testing.T) {
	bare := gpuNode("bare", 8, "A100", 80)
	down := gpuNode("down", 8, "A100", 80, withEngineDown)
	noGPUs := gpuNode("nogpus", 8, "A100", 80, withEngine(false, []string{"/data", "/etc"}))
	small := gpuNode("small", 2, "L4", 24, withEngine(true, []string{"/data"}))
	sim := gpuNode("sim", 4, "A100", 40, simulated, withEngine(false, []string{"/scratch"}))
	capsNode := func(name string, caps ...string) *structs.Node {
		return gpuNode(name, 2, "L4", 24, withEngine(true, nil), allowingCaps(caps...))
	}
	cases := []fitCase{
		{name: "an engine that answers", nodes: []*structs.Node{bare, small}, spec: structs.JobSpec{Image: "busybox", GPUs: 2}},
		{name: "down nodes count", nodes: []*structs.Node{gpuNode("n", 2, "L4", 24, withStatus(structs.NodeDown), withEngine(true, nil))},
			spec: structs.JobSpec{Image: "busybox", GPUs: 2}},
		{name: "simulated GPUs need no engine support", nodes: []*structs.Node{noGPUs, sim}, spec: structs.JobSpec{Image: "busybox", GPUs: 4}},
		{name: "a CPU job needs no engine GPUs", nodes: []*structs.Node{noGPUs}, spec: structs.JobSpec{Image: "busybox"}},
		{name: "no engine", nodes: []*structs.Node{bare, down}, spec: structs.JobSpec{Image: "busybox"},
			want:      "no node can run image busybox: none has a container engine that answers (skein nodes shows each node's engine)",
			wantField: "image"},
		{name: "no engine hands out GPUs", nodes: []*structs.Node{bare, noGPUs}, spec: structs.JobSpec{Image: "busybox", GPUs: 1},
			want: "no node can give the container GPUs: no node's container engine has the nvidia runtime or CDI", wantField: "gpus"},
		{name: "a mount no node allows", nodes: []*structs.Node{small, noGPUs},
			spec: structs.JobSpec{Image: "busybox", Mounts: []structs.Mount{{Source: "/data/x", Target: "/x"}, {Source: "/database", Target: "/db"}}},
			want: "no node with a container engine allows mount /database in its allow_mounts", wantField: "mounts"},
		{name: "mounts no node allows together", nodes: []*structs.Node{small, sim},
			spec: structs.JobSpec{Image: "busybox", Mounts: []structs.Mount{{Source: "/data", Target: "/d"}, {Source: "/scratch", Target: "/s"}}},
			want: "no node with a container engine allows all of the mounts /data, /scratch in its allow_mounts", wantField: "mounts"},
		{name: "a mount allowed only where GPUs are not", nodes: []*structs.Node{small, noGPUs},
			spec: structs.JobSpec{Image: "busybox", GPUs: 1, Mounts: []structs.Mount{{Source: "/etc", Target: "/e"}}},
			want: "no node whose container engine can hand out GPUs allows mount /etc in its allow_mounts", wantField: "mounts"},
		{name: "a capability no node allows", nodes: []*structs.Node{capsNode("a", "NET_RAW", "CHOWN"), capsNode("b", "NET_RAW"), noGPUs},
			spec: structs.JobSpec{Image: "busybox", Caps: []string{"NET_RAW", "SYS_ADMIN"}},
			want: "no node with a container engine allows capability SYS_ADMIN in its allow_caps: they allow CHOWN, NET_RAW", wantField: "caps"},
		{name: "a capability where no node allows any", nodes: []*structs.Node{small},
			spec: structs.JobSpec{Image: "busybox", Caps: []string{"NET_BIND_SERVICE"}},
			want: "no node with a container engine allows capability NET_BIND_SERVICE in its allow_caps: they allow none", wantField: "caps"},
		{name: "capabilities no node allows together", nodes: []*structs.Node{capsNode("a", "NET_RAW"), capsNode("b", "CHOWN")},
			spec:      structs.JobSpec{Image: "busybox", Caps: []string{"NET_RAW", "CHOWN"}},
			want:      "no node with a container engine allows all of the capabilities NET_RAW, CHOWN in its allow_caps: they allow CHOWN, NET_RAW",
			wantField: "caps"},
		{name: "a capability allowed only where the mounts are not", nodes: []*structs.Node{small, capsNode("a", "NET_RAW")},
			spec:      structs.JobSpec{Image: "busybox", Caps: []string{"NET_RAW"}, Mounts: []structs.Mount{{Source: "/data", Target: "/d"}}},
			want:      "no node with a container engine that allows the mounts allows capability NET_RAW in its allow_caps: they allow none",
			wantField: "caps"},
		{name: "a node allowing the capability", nodes: []*structs.Node{small, capsNode("a", "NET_RAW")},
			spec: structs.JobSpec{Image: "busybox", Caps: []string{"NET_RAW"}}},
		{name: "the GPUs of the nodes that can run it", nodes: []*structs.Node{bare, small}, spec: structs.JobSpec{Image: "busybox", GPUs: 4},
			want: "no node that can run the container has 4 GPUs; largest has 2", wantField: "gpus"},
		{name: "every node can run it", nodes: []*structs.Node{small}, spec: structs.JobSpec{Image: "busybox", GPUs: 4},
			want: "no node has 4 GPUs; largest has 2", wantField: "gpus"},
	}
	checkFitCases(t, cases)
}
