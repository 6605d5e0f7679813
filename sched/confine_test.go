package sched

import (
	"testing"
	"time"

	"github.com/skein-dev/skein/structs"
)

func refusingJobs(n *structs.Node) { n.JobsRefused = "this node cannot confine jobs: no cgroups" }

func withPidsMax(p int64) func(*structs.Node) { return func(n *structs.Node) { n.JobPidsMax = p } }

func pidsMax(p int64) func(*structs.JobSpec) { return func(s *structs.JobSpec) { s.PidsMax = p } }

// TestPlace_ConfinementDecidesWhereAJobMayRun: a node that cannot confine
// jobs (and was not allowed to run them unconfined) takes none, and a
// job asking for more processes than a node lets a job hold goes
// elsewhere; each says so when it blocks the job.
func TestPlace_ConfinementDecidesWhereAJobMayRun(t *testing.T) {
	cases := []struct {
		name  string
		nodes []*structs.Node
		job   *structs.Job
		want  string
		why   string
	}{
		{"a node that refuses jobs", []*structs.Node{gpuNode("n1", 8, "A100", 80, refusingJobs)}, job("j", 1),
			"", "1 node: cannot confine jobs and takes none (its agent does not allow unconfined jobs)"},
		{"the node that confines", []*structs.Node{gpuNode("n1", 8, "A100", 80, refusingJobs), gpuNode("n2", 8, "A100", 80)},
			job("j", 1), "n2", ""},
		{"a process limit below the job's", []*structs.Node{gpuNode("n1", 8, "A100", 80, withPidsMax(1024))},
			job("j", 1, pidsMax(2048)), "", "1 node: lets a job hold fewer processes than pids_max 2048"},
		{"a process limit above the job's", []*structs.Node{gpuNode("n1", 8, "A100", 80, withPidsMax(1024)),
			gpuNode("n2", 8, "A100", 80, withPidsMax(4096))}, job("j", 1, pidsMax(2048)), "n2", ""},
		{"a node from before the limit", []*structs.Node{gpuNode("n1", 8, "A100", 80)}, job("j", 1, pidsMax(2048)), "n1", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := Schedule(fakeState{nodes: tc.nodes}, []*structs.Job{tc.job}, Options{Now: time.Unix(1e9, 0)})
			got := placedOn(p, "j")
			switch {
			case tc.want != "" && (len(got) != 1 || got[0][:len(tc.want)+1] != tc.want+":"):
				t.Errorf("placed on %v (blocked %q), want %s", got, blockedReason(p, "j"), tc.want)
			case tc.want == "" && (got != nil || blockedReason(p, "j") != tc.why):
				t.Errorf("placed on %v, blocked %q; want blocked with %q", got, blockedReason(p, "j"), tc.why)
			}
		})
	}
}

func TestCheckFits_AProcessLimitNoNodeLets(t *testing.T) {
	checkFitCases(t, []fitCase{
		{name: "some node lets it", nodes: []*structs.Node{gpuNode("a", 1, "L4", 24, withPidsMax(100)), gpuNode("b", 1, "L4", 24, withPidsMax(5000))},
			spec: structs.JobSpec{PidsMax: 4096}},
		{name: "no node lets it", nodes: []*structs.Node{gpuNode("a", 1, "L4", 24, withPidsMax(100)), gpuNode("b", 1, "L4", 24, withPidsMax(2000))},
			spec: structs.JobSpec{PidsMax: 4096}, want: "pids_max 4096 is above every node's limit of processes for a job; the highest is 2000", wantField: "pids_max"},
	})
}
