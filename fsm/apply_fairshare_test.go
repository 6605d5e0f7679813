package fsm

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/skein-dev/skein/structs"
)

func strp(s string) *string { return &s }

// account applies an account request and fails the test if it is refused.
func (h *harness) account(req structs.AccountRequest) *structs.AccountTable {
	h.t.Helper()
	tab, ok := h.apply(structs.AccountSetType, req).(*structs.AccountTable)
	if !ok {
		h.t.Fatalf("account %s %s: refused", req.Op, req.Name)
	}
	return tab
}

// twoAccounts makes accounts ml (70 shares) and cv (30) with alice in ml
// and bob in cv.
func (h *harness) twoAccounts() {
	h.t.Helper()
	h.account(structs.AccountRequest{Op: structs.AccountCreate, Name: "ml", Shares: intp(70)})
	h.account(structs.AccountRequest{Op: structs.AccountCreate, Name: "cv", Shares: intp(30)})
	h.account(structs.AccountRequest{Op: structs.AccountAddUser, Name: "ml", User: "alice"})
	h.account(structs.AccountRequest{Op: structs.AccountAddUser, Name: "cv", User: "bob"})
}

func TestFSM_AccountTree_RefusesWhatWouldBreakIt(t *testing.T) {
	h := newHarness(t)
	h.twoAccounts()
	h.account(structs.AccountRequest{Op: structs.AccountCreate, Name: "nlp", Parent: strp("ml"), Shares: intp(5)})
	for name, tc := range map[string]struct {
		req  structs.AccountRequest
		want string
	}{
		"twice":             {structs.AccountRequest{Op: structs.AccountCreate, Name: "ml"}, "account: ml exists"},
		"unknown parent":    {structs.AccountRequest{Op: structs.AccountCreate, Name: "x", Parent: strp("nope")}, "parent: nope: no such account"},
		"cycle":             {structs.AccountRequest{Op: structs.AccountUpdate, Name: "ml", Parent: strp("nlp")}, "parent: nlp is ml or below it"},
		"zero shares":       {structs.AccountRequest{Op: structs.AccountCreate, Name: "x", Shares: intp(0)}, "shares: 0 is out of range"},
		"delete a parent":   {structs.AccountRequest{Op: structs.AccountDelete, Name: "ml"}, "ml has sub-account nlp"},
		"bad name":          {structs.AccountRequest{Op: structs.AccountCreate, Name: "ML!"}, `account: "ML!": use lower-case`},
		"remove non-member": {structs.AccountRequest{Op: structs.AccountRemoveUser, Name: "cv", User: "alice"}, "alice is not a member of cv"},
	} {
		before := h.f.Hash()
		err := h.applyErr(structs.AccountSetType, tc.req)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", name, err, tc.want)
		}
		if h.f.Hash() != before {
			t.Errorf("%s: a refused request changed the state", name)
		}
	}
}

func TestFSM_AccountMembership_FirstAccountIsTheDefault(t *testing.T) {
	h := newHarness(t)
	h.twoAccounts()
	h.account(structs.AccountRequest{Op: structs.AccountAddUser, Name: "cv", User: "alice"})
	fs := h.f.FairShare()
	if d := fs.Accounts.Defaults["alice"]; d != "ml" {
		t.Fatalf("alice's default %q, want ml (her first account)", d)
	}
	h.account(structs.AccountRequest{Op: structs.AccountRemoveUser, Name: "ml", User: "alice"})
	if d := h.f.FairShare().Accounts.Defaults["alice"]; d != "cv" {
		t.Fatalf("alice's default %q after leaving ml, want cv", d)
	}
	h.account(structs.AccountRequest{Op: structs.AccountRemoveUser, Name: "cv", User: "alice"})
	if d, ok := h.f.FairShare().Accounts.Defaults["alice"]; ok {
		t.Fatalf("alice in no account still has the default %q", d)
	}
}

func TestFSM_Submit_AccountMustBeTheUsers(t *testing.T) {
	h := newHarness(t)
	h.bootstrapACL()
	h.twoAccounts()
	j, ok := h.submitAs("alice", "a1", 0, spec(1, 1)).(*structs.Job)
	if !ok || j.Spec.Account != "ml" {
		t.Fatalf("alice's job without --account: %+v, want account ml (her default)", j)
	}
	s := spec(1, 1)
	s.Account = "cv"
	before := h.f.Hash()
	err, _ := h.submitAs("alice", "a2", 0, s).(error)
	wantErrIs(t, err, ErrAccount, "account: alice is not a member of account cv")
	if h.f.Hash() != before {
		t.Fatal("a refused submit changed the state")
	}
	if err := h.f.CheckSubmitAccount("alice", s); err == nil {
		t.Fatal("CheckSubmitAccount lets alice use cv")
	}
	s.Account = "nope"
	err, _ = h.submitAs("bob", "b1", 0, s).(error)
	wantErrIs(t, err, ErrAccount, "account: nope: no such account")
	s.Account = "cv"
	if j, ok := h.submitAs("bob", "b2", 0, s).(*structs.Job); !ok || j.Spec.Account != "cv" {
		t.Fatalf("bob's job in his own account: %v", j)
	}
	// A user in no account runs outside every account.
	if j, ok := h.submitAs("carol", "c1", 0, spec(1, 1)).(*structs.Job); !ok || j.Spec.Account != "" {
		t.Fatalf("carol's job: %v", j)
	}
}

func TestFSM_Submit_WithoutACLsAnyAccountMayBeNamed(t *testing.T) {
	h := newHarness(t)
	h.twoAccounts()
	s := spec(1, 1)
	s.Account = "cv"
	if j, ok := h.submitAs("", "x", 0, s).(*structs.Job); !ok || j.Spec.Account != "cv" {
		t.Fatalf("submit to cv without ACLs: %v", j)
	}
}

func TestFSM_Submit_QoSWallTime(t *testing.T) {
	h := newHarness(t)
	q := structs.QoS{Name: "short", Priority: 100, MaxWall: structs.Duration(time.Hour)}
	if _, ok := h.apply(structs.QoSSetType, structs.QoSRequest{Op: structs.QoSSet, QoS: q}).(*structs.AccountTable); !ok {
		t.Fatal("qos set refused")
	}
	s := spec(1, 1)
	s.QoS = "short"
	j, ok := h.submitAs("", "j1", 0, s).(*structs.Job)
	if !ok || j.Spec.TimeLimit != structs.Duration(time.Hour) {
		t.Fatalf("a job of QoS short without a time limit: %+v, want the QoS's 1h", j)
	}
	s.TimeLimit = structs.Duration(2 * time.Hour)
	err, _ := h.submitAs("", "j2", 0, s).(error)
	wantErrIs(t, err, ErrAccount, "time_limit: 2h0m0s is past QoS short's wall time 1h0m0s")
	s.QoS = "gold"
	err, _ = h.submitAs("", "j3", 0, s).(error)
	wantErrIs(t, err, ErrAccount, "qos: gold: no such QoS")
	// A QoS that another preempts cannot go.
	q2 := structs.QoS{Name: "high", Preempt: []string{"short"}}
	if _, ok := h.apply(structs.QoSSetType, structs.QoSRequest{Op: structs.QoSSet, QoS: q2}).(*structs.AccountTable); !ok {
		t.Fatal("qos high refused")
	}
	err = h.applyErr(structs.QoSSetType, structs.QoSRequest{Op: structs.QoSDelete, QoS: structs.QoS{Name: "short"}})
	if err == nil || !strings.Contains(err.Error(), "high preempts short") {
		t.Fatalf("deleting a preempted QoS: %v", err)
	}
}

// charge applies a usage charge at.
func (h *harness) charge(at time.Time, halfLife time.Duration) {
	h.t.Helper()
	if err := h.applyErr(structs.UsageChargeType, structs.UsageChargeRequest{At: at, HalfLife: structs.Duration(halfLife)}); err != nil {
		h.t.Fatalf("charge: %v", err)
	}
}

// usageOf returns the usage recorded for a user in an account.
func usageOf(f *FSM, account, user string) structs.Usage {
	for _, r := range f.FairShare().Usage {
		if r.Account == account && r.User == user {
			return r.Usage
		}
	}
	return structs.Usage{}
}

// runningAt places job id on node n1 with gpus GPUs and reports it
// running at start.
func (h *harness) runningAt(id string, gpus int, start time.Time) {
	h.t.Helper()
	var ids []string
	for i := range gpus {
		ids = append(ids, gpuID("n1", i))
	}
	a := alloc(id+"0", "n1", 0, ids...)
	a.CPUs, a.MemoryMiB = 4, 1024
	h.place(id, a)
	if err := h.applyErr(structs.AllocUpdateType, structs.AllocUpdateRequest{NodeID: "n1",
		Updates: []structs.AllocUpdate{{AllocID: id + "0", State: structs.AllocRunning, At: start}}}); err != nil {
		h.t.Fatalf("start %s: %v", id, err)
	}
}

// cpuSpec is a job of gpus GPUs, 4 CPUs and 1 GiB, as runningAt places it.
func cpuSpec(gpus int) structs.JobSpec {
	s := spec(1, gpus)
	s.CPUs, s.MemoryMiB = 4, 1024
	return s
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-6*math.Max(1, math.Abs(b)) }

func TestFSM_UsageCharge_ChargesRunningAllocationsAndDecays(t *testing.T) {
	h := newHarness(t)
	h.bootstrapACL()
	h.twoAccounts()
	h.register(node("n1", 8))
	if _, ok := h.submitAs("alice", "a", 0, cpuSpec(4)).(*structs.Job); !ok {
		t.Fatal("submit refused")
	}
	start := t0.Add(time.Hour)
	h.runningAt("a", 4, start)
	day := 24 * time.Hour
	h.charge(start.Add(100*time.Second), day)
	u := usageOf(h.f, "ml", "alice")
	if !near(u.GPUSeconds, 400) || !near(u.CPUSeconds, 400) || !near(u.MemMiBSeconds, 102400) {
		t.Fatalf("after 100 s of 4 GPUs, 4 CPUs, 1 GiB: %+v", u)
	}
	// A charge not after the last one counts nothing.
	before := h.f.Hash()
	h.charge(start.Add(50*time.Second), day)
	if h.f.Hash() != before {
		t.Fatal("a charge stamped before the last one changed the state")
	}
	// The job ends 100 s later: charged at its end, not at the next charge.
	if err := h.applyErr(structs.AllocUpdateType, structs.AllocUpdateRequest{NodeID: "n1",
		Updates: []structs.AllocUpdate{{AllocID: "a0", State: structs.AllocSucceeded, At: start.Add(200 * time.Second)}}}); err != nil {
		t.Fatal(err)
	}
	if u := usageOf(h.f, "ml", "alice"); !near(u.GPUSeconds, 800) {
		t.Fatalf("after the end, 200 s of 4 GPUs: %v GPU-seconds", u.GPUSeconds)
	}
	// One half-life later it counts for half.
	h.charge(start.Add(100*time.Second+day), day)
	if u := usageOf(h.f, "ml", "alice"); !near(u.GPUSeconds, 400) {
		t.Fatalf("a half-life later: %v GPU-seconds, want 400", u.GPUSeconds)
	}
	if u := usageOf(h.f, "cv", "bob"); !u.IsZero() {
		t.Fatalf("bob ran nothing but has %+v", u)
	}
	// Decayed to nothing, the record goes: the table stays bounded.
	h.charge(start.Add(60*day), day)
	if got := h.f.FairShare().Usage; len(got) != 0 {
		t.Fatalf("usage after 60 half-lives: %+v", got)
	}
}

func TestDecayFactor_HalvesPerHalfLifeAndIsMonotone(t *testing.T) {
	h := 7 * 24 * time.Hour
	for _, tc := range []struct {
		dt   time.Duration
		want float64
	}{{0, 1}, {h, 0.5}, {2 * h, 0.25}, {h / 2, math.Sqrt(0.5)}, {3*h + h/4, 0.125 * math.Pow(2, -0.25)}} {
		if got := structs.DecayFactor(tc.dt, h); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("DecayFactor(%s) = %v, want %v", tc.dt, got, tc.want)
		}
	}
	prev := 2.0
	for dt := time.Duration(0); dt < 5*h; dt += h / 97 {
		f := structs.DecayFactor(dt, h)
		if f >= prev || f <= 0 {
			t.Fatalf("DecayFactor(%s) = %v, not below %v", dt, f, prev)
		}
		prev = f
	}
}

func TestFSM_SnapshotRoundTripsFairShare(t *testing.T) {
	h := newHarness(t)
	h.bootstrapACL()
	h.twoAccounts()
	if _, ok := h.apply(structs.QoSSetType, structs.QoSRequest{Op: structs.QoSSet,
		QoS: structs.QoS{Name: "high", Priority: 500, MaxGPUsPerUser: intp(8)}}).(*structs.AccountTable); !ok {
		t.Fatal("qos refused")
	}
	h.account(structs.AccountRequest{Op: structs.AccountSetWeights, Weights: &structs.PriorityWeights{
		Age: 10, FairShare: 100, JobSize: 1, QoS: 20, MaxAge: structs.Duration(time.Hour)}})
	h.register(node("n1", 8))
	h.submitAs("alice", "a", 0, cpuSpec(2))
	h.runningAt("a", 2, t0)
	h.charge(t0.Add(time.Minute), time.Hour)
	// Version 8 or later carries the fair-share records (its job's
	// number makes it 9).
	data := snapshotBytes(t, h.f)
	if v := headerVersion(t, h.f); v < fairshareSnapshotVersion {
		t.Fatalf("snapshot version %d, want %d or later", v, fairshareSnapshotVersion)
	}
	g := restoreFresh(t, h.f)
	if g.Hash() != h.f.Hash() {
		t.Fatal("restored fair-share state differs")
	}
	got, want := g.FairShare(), h.f.FairShare()
	if !got.At.Equal(want.At) || len(got.Usage) != 1 || got.Usage[0] != want.Usage[0] || !got.Accounts.Member("ml", "alice") ||
		got.Accounts.PriorityWeights().QoS != 20 || got.Accounts.QoS["high"].Priority != 500 {
		t.Fatalf("restored %+v, want %+v", got, want)
	}
	// Both go on alike.
	other := &harness{t: t, f: g, idx: h.idx}
	for _, x := range []*harness{h, other} {
		x.charge(t0.Add(time.Hour), time.Hour)
	}
	if g.Hash() != h.f.Hash() {
		t.Fatal("the restored FSM charged differently")
	}
	// A fair-share record in an older snapshot is refused.
	old := bytes.Replace(data, []byte(fmt.Sprintf(`{"version":%d,`, headerVersion(t, h.f))), []byte(`{"version":6,`), 1)
	if err := New(nil).Restore(readCloser(old)); err == nil || !strings.Contains(err.Error(), "record in a version 6 snapshot") {
		t.Fatalf("restore of fair-share records in version 6: %v", err)
	}
}

func TestFSM_UsageCharge_ReplicasAgree(t *testing.T) {
	// Many allocations charged in map order must still give every
	// replica the same bits.
	build := func() *FSM {
		h := newHarness(t)
		h.twoAccounts()
		for i := range 8 {
			n := node(string(rune('a'+i)), 8)
			h.register(n)
		}
		for i := range 40 {
			s := spec(1, 1)
			s.Account = []string{"ml", "cv"}[i%2]
			s.CPUs, s.MemoryMiB = 1+i%3, structs.SizeMiB(100*i+7)
			id := "j" + string(rune('A'+i))
			h.submitAs("", id, 0, s)
			n := string(rune('a' + i%8))
			a := alloc(id+"0", n, 0, gpuID(n, i/8))
			a.CPUs, a.MemoryMiB = 1+i%3, int64(100*i+7)
			h.place(id, a)
			h.f.Apply(mustLog(t, h, structs.AllocUpdateType, structs.AllocUpdateRequest{NodeID: n,
				Updates: []structs.AllocUpdate{{AllocID: id + "0", State: structs.AllocRunning, At: t0.Add(time.Duration(i*137) * time.Millisecond)}}}))
		}
		for k := 1; k <= 5; k++ {
			h.charge(t0.Add(time.Duration(k)*time.Minute+time.Duration(k*k)*time.Millisecond), 3*time.Hour)
		}
		return h.f
	}
	a, b := build(), build()
	if a.Hash() != b.Hash() {
		t.Fatal("two replicas applying the same charges differ")
	}
}

// mustLog encodes msg as the harness's next entry.
func mustLog(t *testing.T, h *harness, mt structs.MessageType, msg any) *raft.Log {
	buf, err := structs.Encode(mt, msg)
	if err != nil {
		t.Fatal(err)
	}
	h.idx++
	return &raft.Log{Index: h.idx, Data: buf}
}

func TestFSM_Preempt_AQoSMayStopTheQoSItPreempts(t *testing.T) {
	h := newHarness(t)
	for _, q := range []structs.QoS{{Name: "scavenger"}, {Name: "high", Preempt: []string{"scavenger"}}, {Name: "normal"}} {
		if _, ok := h.apply(structs.QoSSetType, structs.QoSRequest{Op: structs.QoSSet, QoS: q}).(*structs.AccountTable); !ok {
			t.Fatalf("qos %s refused", q.Name)
		}
	}
	h.register(node("n1", 8))
	run := func(id, qos string, gpu int) {
		s := spec(1, 1)
		s.QoS = qos
		h.submitAs("", id, 0, s)
		h.place(id, alloc(id+"0", "n1", 0, gpuID("n1", gpu)))
	}
	run("scav", "scavenger", 0) // not submitted as preemptible
	run("norm", "normal", 1)
	s := spec(1, 1)
	s.QoS = "high"
	h.submitAs("", "urgent", 0, s)
	err := h.applyErr(structs.JobPreemptType, structs.JobPreemptRequest{Victims: []string{"norm"}, For: "urgent", At: h.at()})
	wantErrIs(t, err, ErrNotPreemptible, "not submitted as preemptible")
	if err := h.applyErr(structs.JobPreemptType, structs.JobPreemptRequest{Victims: []string{"scav"}, For: "urgent", At: h.at()}); err != nil {
		t.Fatalf("a high job preempting a scavenger job: %v", err)
	}
	if j := h.job("scav"); j.PreemptedBy != "urgent" {
		t.Fatalf("scav not preempted: %+v", j)
	}
}

func TestFSM_ServiceReplicasAreChargedToAnAccountOfTheirOwner(t *testing.T) {
	h := newHarness(t)
	h.bootstrapACL()
	h.twoAccounts()
	svc := structs.Service{ID: "svc-1", Name: "chat", Owner: "alice", Replicas: 1,
		Spec: structs.ServiceSpec{Job: spec(1, 1)}, CreatedAt: h.at()}
	svc.Spec.Job.Account = "cv"
	err := h.applyErr(structs.ServiceRegisterType, structs.ServiceRegisterRequest{Service: svc})
	wantErrIs(t, err, ErrAccount, "alice is not a member of account cv")
	svc.Spec.Job.Account = ""
	if err := h.applyErr(structs.ServiceRegisterType, structs.ServiceRegisterRequest{Service: svc}); err != nil {
		t.Fatal(err)
	}
	for _, j := range h.f.Jobs() {
		if j.Service == "chat" && j.Spec.Account != "ml" {
			t.Fatalf("replica %s charged to %q, want alice's default ml", j.ID, j.Spec.Account)
		}
	}
}

func TestFSM_UsageCharge_ADeletedAccountsUsageGoes(t *testing.T) {
	h := newHarness(t)
	h.twoAccounts()
	h.register(node("n1", 8))
	s := cpuSpec(1)
	s.Account = "cv"
	h.submitAs("bob", "b", 0, s)
	h.runningAt("b", 1, t0)
	h.charge(t0.Add(time.Minute), time.Hour)
	if u := usageOf(h.f, "cv", "bob"); u.GPUSeconds != 60 {
		t.Fatalf("bob's usage in cv: %+v", u)
	}
	h.account(structs.AccountRequest{Op: structs.AccountDelete, Name: "cv"})
	if u := usageOf(h.f, "cv", "bob"); !u.IsZero() {
		t.Fatalf("cv deleted, its usage stays: %+v", u)
	}
	// bob's job still runs in the gone account: its use is not kept.
	h.charge(t0.Add(2*time.Minute), time.Hour)
	if u := usageOf(h.f, "cv", "bob"); !u.IsZero() {
		t.Fatalf("a charge after cv was deleted recorded %+v for it", u)
	}
}
