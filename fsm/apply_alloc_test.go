package fsm

import (
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/structs"
)

func TestFSM_AllocUpdate_SingleRankSucceeds(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 1))
	h.submit("j", spec(1, 1))
	h.place("j", alloc("a0", "n1", 0, gpuID("n1", 0)))

	started := h.at()
	h.mustUpdate("n1", "a0", structs.AllocRunning, 0, "")
	if a := h.alloc("a0"); a.State != structs.AllocRunning || !a.StartedAt.Equal(started) || a.ModifyIndex != h.idx {
		t.Fatalf("alloc after running: %+v", a)
	}
	finished := h.at()
	h.mustUpdate("n1", "a0", structs.AllocSucceeded, 0, "")
	a := h.alloc("a0")
	if a.State != structs.AllocSucceeded || !a.FinishedAt.Equal(finished) {
		t.Fatalf("alloc after succeeded: %+v", a)
	}
	j := h.job("j")
	if j.State != structs.JobSucceeded || j.ExitCode != 0 || !j.FinishedAt.Equal(finished) || j.Reason != "" {
		t.Fatalf("job after its alloc succeeded: %+v", j)
	}
	if live := h.f.State().LiveAllocs; len(live) != 0 {
		t.Fatalf("live allocs after the job ended: %v", live)
	}

	// The GPU is free again.
	h.submit("k", spec(1, 1))
	h.place("k", alloc("k0", "n1", 0, gpuID("n1", 0)))
}

func TestFSM_AllocUpdate_RunningRecordsTheAccountOnce(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 1))
	h.submit("j", spec(1, 1))
	h.place("j", alloc("a0", "n1", 0, gpuID("n1", 0)))
	run := func(as string) {
		h.apply(structs.AllocUpdateType, structs.AllocUpdateRequest{NodeID: "n1", Updates: []structs.AllocUpdate{
			{AllocID: "a0", State: structs.AllocRunning, At: h.at(), RunAs: as},
		}})
	}
	run("alice (uid 1001)")
	run("mallory (uid 0)") // a repeated report changes nothing
	if a := h.alloc("a0"); a.RunAs != "alice (uid 1001)" {
		t.Fatalf("RunAs %q", a.RunAs)
	}
	h.submit("k", spec(1, 0))
	h.place("k", alloc("k0", "n1", 0))
	h.apply(structs.AllocUpdateType, structs.AllocUpdateRequest{NodeID: "n1", Updates: []structs.AllocUpdate{
		{AllocID: "k0", State: structs.AllocRunning, At: h.at(), RunAs: string(make([]byte, 4*structs.MaxNameLen))},
	}})
	if a := h.alloc("k0"); len(a.RunAs) != structs.MaxNameLen {
		t.Fatalf("a long RunAs is kept at %d bytes, want %d", len(a.RunAs), structs.MaxNameLen)
	}
}

func TestFSM_AllocUpdate_FencingSkipsOtherNodesAllocs(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 1))
	h.register(node("n2", 1))
	h.submit("j", spec(1, 1))
	h.place("j", alloc("a0", "n1", 0, gpuID("n1", 0)))
	before := h.f.Hash()

	err := h.update("n2", "a0", structs.AllocFailed, 1, "")
	wantErrIs(t, err, ErrWrongNode, "alloc a0", "on node n1, reported by node n2")
	if h.f.Hash() != before {
		t.Fatal("an update from the wrong node changed state")
	}
}

func TestFSM_AllocUpdate_ReportsSkippedAndAppliesTheRest(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 2))
	h.submit("j", spec(1, 1))
	h.place("j", alloc("a0", "n1", 0, gpuID("n1", 0)))
	err := h.applyErr(structs.AllocUpdateType, structs.AllocUpdateRequest{NodeID: "n1", Updates: []structs.AllocUpdate{
		{AllocID: "ghost", State: structs.AllocRunning, At: t0},
		{AllocID: "a0", State: "sleeping", At: t0},
		{AllocID: "a0", State: structs.AllocRunning, At: t0},
	}})
	wantErrIs(t, err, ErrAllocNotFound, "alloc ghost")
	wantErrIs(t, err, ErrInvalidRequest, `unknown state "sleeping"`)
	if a := h.alloc("a0"); a.State != structs.AllocRunning {
		t.Fatalf("the valid update was not applied: %+v", a)
	}
}

func TestFSM_AllocUpdate_NeverMovesBackwards(t *testing.T) {
	cases := []struct {
		name  string
		path  []structs.AllocState // applied first
		then  structs.AllocState   // must be ignored
		final structs.AllocState
	}{
		{"running to pending", []structs.AllocState{structs.AllocRunning}, structs.AllocPending, structs.AllocRunning},
		{"running to running", []structs.AllocState{structs.AllocRunning}, structs.AllocRunning, structs.AllocRunning},
		{"succeeded to running", []structs.AllocState{structs.AllocSucceeded}, structs.AllocRunning, structs.AllocSucceeded},
		{"failed to succeeded", []structs.AllocState{structs.AllocRunning, structs.AllocFailed}, structs.AllocSucceeded, structs.AllocFailed},
		{"killed to lost", []structs.AllocState{structs.AllocKilled}, structs.AllocLost, structs.AllocKilled},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.register(node("n1", 1))
			h.submit("j", spec(1, 1))
			h.place("j", alloc("a0", "n1", 0, gpuID("n1", 0)))
			for _, st := range tc.path {
				h.mustUpdate("n1", "a0", st, 1, "")
			}
			before := h.f.Hash()
			h.mustUpdate("n1", "a0", tc.then, 0, "")
			if h.f.Hash() != before {
				t.Fatalf("update to %s changed state", tc.then)
			}
			if got := h.alloc("a0").State; got != tc.final {
				t.Fatalf("alloc is %s, want %s", got, tc.final)
			}
		})
	}
}

func TestFSM_GangStopsWhenARankFails(t *testing.T) {
	h := newHarness(t)
	for _, id := range []string{"n1", "n2", "n3"} {
		h.register(node(id, 1))
	}
	h.submit("j", spec(3, 1))
	h.place("j",
		alloc("a0", "n1", 0, gpuID("n1", 0)),
		alloc("a1", "n2", 1, gpuID("n2", 0)),
		alloc("a2", "n3", 2, gpuID("n3", 0)))
	for _, a := range []struct{ node, id string }{{"n1", "a0"}, {"n2", "a1"}, {"n3", "a2"}} {
		h.mustUpdate(a.node, a.id, structs.AllocRunning, 0, "")
	}

	h.mustUpdate("n2", "a1", structs.AllocFailed, 3, "")
	for _, id := range []string{"a0", "a2"} {
		if a := h.alloc(id); a.DesiredState != structs.DesiredStop || a.ModifyIndex != h.idx {
			t.Fatalf("alloc %s after rank 1 failed: %+v", id, a)
		}
	}
	if j := h.job("j"); j.State != structs.JobRunning {
		t.Fatalf("job %s while ranks still run", j.State)
	}
	h.mustUpdate("n1", "a0", structs.AllocKilled, 143, "")
	h.mustUpdate("n3", "a2", structs.AllocKilled, 143, "")
	j := h.job("j")
	if j.State != structs.JobFailed || j.ExitCode != 143 || j.Reason != "rank 0 killed" {
		t.Fatalf("job after the gang stopped: state %s, exit %d, reason %q", j.State, j.ExitCode, j.Reason)
	}
}

func TestFSM_RestartPolicyRequeuesThenFails(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 1))
	s := spec(1, 1)
	s.Restarts = 1
	h.submit("j", s)

	h.place("j", alloc("a1", "n1", 0, gpuID("n1", 0)))
	h.mustUpdate("n1", "a1", structs.AllocRunning, 0, "")
	h.mustUpdate("n1", "a1", structs.AllocFailed, 3, "")
	j := h.job("j")
	if j.State != structs.JobQueued || j.Attempts != 1 || j.ExitCode != 3 || !j.StartedAt.IsZero() || !j.FinishedAt.IsZero() ||
		j.Reason != "restarting in 1s after failure: exited with code 3 (attempt 2 of 2)" {
		t.Fatalf("job after the first failure: %+v", j)
	}
	// The backoff is stamped from the entry's time, never the clock.
	if want := h.alloc("a1").FinishedAt.Add(time.Second); !j.NotBefore.Equal(want) {
		t.Fatalf("not before %v, want %v", j.NotBefore, want)
	}
	if q := h.f.State().Queued; len(q) != 1 || q[0].ID != "j" {
		t.Fatalf("requeued job not in the queue: %v", q)
	}

	h.place("j", alloc("a2", "n1", 0, gpuID("n1", 0)))
	if a := h.alloc("a2"); a.Attempt != 2 {
		t.Fatalf("second placement has attempt %d, want 2", a.Attempt)
	}
	h.mustUpdate("n1", "a2", structs.AllocKilled, 137, "killed: node drained")
	j = h.job("j")
	if j.State != structs.JobFailed || j.Attempts != 2 || j.ExitCode != 137 || j.Reason != "killed: node drained" || j.FinishedAt.IsZero() {
		t.Fatalf("job after the last failure: %+v", j)
	}
}

func TestFSM_TimedOutJobEndsTimedOutWithoutUsingARestart(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 1))
	h.register(node("n2", 1))
	s := spec(2, 1)
	s.Restarts = 3
	s.TimeLimit = structs.Duration(time.Hour)
	h.apply(structs.JobSubmitType, structs.JobSubmitRequest{JobID: "j", Spec: s, SubmittedAt: t0})
	h.place("j", alloc("a0", "n1", 0, gpuID("n1", 0)), alloc("a1", "n2", 1, gpuID("n2", 0)))
	h.mustUpdate("n1", "a0", structs.AllocRunning, 0, "")
	h.mustUpdate("n2", "a1", structs.AllocRunning, 0, "")
	// Rank 1's limit fires first; rank 0 is asked to stop with it.
	h.mustUpdate("n2", "a1", structs.AllocTimedOut, 143, "time limit 1h0m0s exceeded")
	if a := h.alloc("a0"); a.DesiredState != structs.DesiredStop {
		t.Fatalf("rank 0 after rank 1 timed out: %+v, want asked to stop", a)
	}
	if j := h.job("j"); j.State != structs.JobRunning {
		t.Fatalf("job is %s before its last rank ended, want running", j.State)
	}
	h.mustUpdate("n1", "a0", structs.AllocKilled, 143, "killed: rank 1 timed out")
	j := h.job("j")
	if j.State != structs.JobTimedOut || j.Attempts != 1 || j.ExitCode != 143 ||
		j.Reason != "rank 1 time limit 1h0m0s exceeded" || j.FinishedAt.IsZero() {
		t.Fatalf("job: %+v, want timed out after one attempt", j)
	}
	if q := h.f.State().Queued; len(q) != 0 {
		t.Fatalf("a timed out job was requeued: %v", q)
	}
	if c := h.f.JobCounts(); c[structs.JobTimedOut] != 1 {
		t.Fatalf("counts %v, want one timed out", c)
	}
}

func TestFSM_FailedJobNamesLowestFailedRank(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 0))
	h.register(node("n2", 0))
	h.submit("j", spec(2, 0))
	h.place("j", alloc("a0", "n1", 0), alloc("a1", "n2", 1))
	h.mustUpdate("n2", "a1", structs.AllocFailed, 2, "")
	h.mustUpdate("n1", "a0", structs.AllocFailed, 9, "")
	if j := h.job("j"); j.State != structs.JobFailed || j.ExitCode != 9 || j.Reason != "rank 0 exited with code 9" {
		t.Fatalf("job: state %s, exit %d, reason %q", j.State, j.ExitCode, j.Reason)
	}
}

func TestFSM_Cancel_RunningJobWithoutLiveAllocsEndsAtOnce(t *testing.T) {
	// Apply never leaves a running job without live allocations, but a
	// restored snapshot could hold one; cancelling it must not wait forever.
	h := newHarness(t)
	h.register(node("n1", 0))
	h.submit("j", spec(1, 0))
	h.place("j", alloc("a0", "n1", 0))
	h.f.st.allocs["a0"].State = structs.AllocLost
	h.f.st.release(h.f.st.allocs["a0"])
	j := h.apply(structs.JobCancelType, structs.JobCancelRequest{JobID: "j", At: t0}).(*structs.Job)
	if j.State != structs.JobCancelled || j.Reason != "cancelled by user" {
		t.Fatalf("job: %+v", j)
	}
}

func TestFSM_AllocUpdate_PendingPullProgressIsKeptUntilTheAllocationRuns(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 1))
	h.submit("j", spec(1, 0))
	h.place("j", alloc("a0", "n1", 0))
	pull := func(p structs.PullProgress) {
		h.apply(structs.AllocUpdateType, structs.AllocUpdateRequest{NodeID: "n1", Updates: []structs.AllocUpdate{
			{AllocID: "a0", State: structs.AllocPending, At: h.at(), Pull: &p},
		}})
	}
	sent := structs.PullProgress{Image: "pytorch:24.01", Bytes: 100, Total: 1000, At: h.at()}
	pull(sent)
	a := h.alloc("a0")
	if a.State != structs.AllocPending || a.Pull == nil || *a.Pull != sent || a.ModifyIndex != h.idx {
		t.Fatalf("alloc after a pull report: %+v (pull %+v), want pending with %+v at index %d", a, a.Pull, sent, h.idx)
	}
	sent.Bytes = 200 // the state keeps a copy, not the sender's value
	if h.alloc("a0").Pull.Bytes != 100 {
		t.Fatal("the stored pull progress shares memory with the report")
	}

	// The same report again changes nothing.
	before, index := h.f.Hash(), h.alloc("a0").ModifyIndex
	pull(structs.PullProgress{Image: "pytorch:24.01", Bytes: 100, Total: 1000, At: a.Pull.At})
	if h.f.Hash() != before || h.alloc("a0").ModifyIndex != index {
		t.Fatal("a repeated pull report changed the state")
	}

	// A node's odd numbers are bounded: a long image is cut, counts are
	// not negative and the bytes not past a known total.
	pull(structs.PullProgress{Image: strings.Repeat("i", 4*structs.MaxImageRefLen), Bytes: -5, Total: -1})
	if p := h.alloc("a0").Pull; len(p.Image) != structs.MaxImageRefLen || p.Bytes != 0 || p.Total != 0 {
		t.Fatalf("pull progress %+v, want the image cut to %d bytes and counts of 0", p, structs.MaxImageRefLen)
	}
	pull(structs.PullProgress{Image: "x", Bytes: 5000, Total: 1000})
	if p := h.alloc("a0").Pull; p.Bytes != 1000 {
		t.Fatalf("bytes %d past the total 1000", p.Bytes)
	}

	h.mustUpdate("n1", "a0", structs.AllocRunning, 0, "")
	if a := h.alloc("a0"); a.Pull != nil {
		t.Fatalf("a running allocation still says it pulls: %+v", a.Pull)
	}
	before = h.f.Hash()
	pull(structs.PullProgress{Image: "x", Bytes: 1})
	if h.f.Hash() != before || h.alloc("a0").Pull != nil {
		t.Fatal("a pull report for a running allocation changed it")
	}
}

func TestFSM_AllocUpdate_AFailedPullEndsWithItsReasonAndNoProgress(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 0))
	h.submit("j", spec(1, 0))
	h.place("j", alloc("a0", "n1", 0))
	h.apply(structs.AllocUpdateType, structs.AllocUpdateRequest{NodeID: "n1", Updates: []structs.AllocUpdate{
		{AllocID: "a0", State: structs.AllocPending, At: h.at(), Pull: &structs.PullProgress{Image: "x", Bytes: 10, Total: 100}},
	}})
	h.mustUpdate("n1", "a0", structs.AllocFailed, -1, "pull x: manifest unknown")
	if a := h.alloc("a0"); a.State != structs.AllocFailed || a.Pull != nil || a.Reason != "pull x: manifest unknown" {
		t.Fatalf("alloc after a failed pull: %s %q, pull %+v; want failed with the reason and no progress", a.State, a.Reason, a.Pull)
	}
}

func TestFSM_AllocUpdate_PullReportOfAnotherNodeIsRefused(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 0))
	h.register(node("n2", 0))
	h.submit("j", spec(1, 0))
	h.place("j", alloc("a0", "n1", 0))
	err := h.applyErr(structs.AllocUpdateType, structs.AllocUpdateRequest{NodeID: "n2", Updates: []structs.AllocUpdate{
		{AllocID: "a0", State: structs.AllocPending, At: h.at(), Pull: &structs.PullProgress{Image: "x", Bytes: 10}},
	}})
	wantErrIs(t, err, ErrWrongNode)
	if a := h.alloc("a0"); a.Pull != nil {
		t.Fatalf("another node's report set the pull progress: %+v", a.Pull)
	}
}

// TestFSM_AllocUpdate_TheEndRecordsWhatTheJobUsed: a terminal report's
// usage is kept on the allocation, without negative counts, and a
// report after the end changes nothing.
func TestFSM_AllocUpdate_TheEndRecordsWhatTheJobUsed(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 1))
	h.submit("j", spec(1, 1))
	h.place("j", alloc("a0", "n1", 0, gpuID("n1", 0)))
	h.mustUpdate("n1", "a0", structs.AllocRunning, 0, "")
	end := func(u structs.AllocUsage) {
		h.apply(structs.AllocUpdateType, structs.AllocUpdateRequest{NodeID: "n1", Updates: []structs.AllocUpdate{
			{AllocID: "a0", State: structs.AllocFailed, ExitCode: 137, At: h.at(),
				Reason: "out of memory: used 64M of its 64M limit", Usage: &u},
		}})
	}
	end(structs.AllocUsage{MemoryPeakBytes: 64 << 20, OOMKills: 1,
		CPUTime: structs.Duration(3 * time.Second), ThrottledPeriods: -2, MemoryLimitBytes: -1})
	want := structs.AllocUsage{MemoryPeakBytes: 64 << 20, OOMKills: 1, CPUTime: structs.Duration(3 * time.Second)}
	a := h.alloc("a0")
	if a.Usage == nil || *a.Usage != want {
		t.Fatalf("usage %+v, want %+v", a.Usage, want)
	}
	if j := h.job("j"); j.State != structs.JobFailed || !strings.Contains(j.Reason, "out of memory") || j.Usage == nil || *j.Usage != want {
		t.Errorf("job %s: %q, usage %+v; want failed, out of memory, with the allocation's usage", j.State, j.Reason, j.Usage)
	}
	end(structs.AllocUsage{MemoryPeakBytes: 1})
	if a := h.alloc("a0"); *a.Usage != want {
		t.Errorf("a report after the end changed the usage to %+v", a.Usage)
	}
}
