package fsm

import (
	"bytes"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/skein-dev/skein/structs"
)

// viewHarness is a state with three nodes: a 2-node job "gang" running on
// n1 (rank 0) and n2 (rank 1), a job "other" on n3, a finished job "done"
// on n1, a job "waiting" queued, and a service "web".
func viewHarness(t *testing.T) *harness {
	t.Helper()
	h := newHarness(t)
	for _, id := range []string{"n1", "n2", "n3"} {
		h.register(node(id, 2))
	}
	h.finished("done", spec(1, 0))
	h.submit("gang", spec(2, 1))
	h.place("gang", alloc("gang0", "n1", 0, gpuID("n1", 0)), alloc("gang1", "n2", 1, gpuID("n2", 0)))
	h.submit("other", spec(1, 1))
	h.place("other", alloc("other0", "n3", 0, gpuID("n3", 0)))
	h.submit("waiting", spec(1, 2))
	h.registerService(service("web", 1, 1))
	return h
}

// loadView loads node id's view of f into a fresh FSM.
func loadView(t *testing.T, f *FSM, id string) (*FSM, NodeView) {
	t.Helper()
	v, err := f.NodeView(id)
	if err != nil {
		t.Fatal(err)
	}
	w := New(nil)
	if err := w.LoadView(bytes.NewReader(v.Data)); err != nil {
		t.Fatal(err)
	}
	return w, v
}

func TestNodeView_HoldsWhatTheNodeRunsAndItsPeersOnly(t *testing.T) {
	h := viewHarness(t)
	w, v := loadView(t, h.f, "n1")

	if v.Index != h.f.Index() || w.Index() != h.f.Index() {
		t.Fatalf("view index %d, loaded %d, want the state's %d", v.Index, w.Index(), h.f.Index())
	}
	if got := slices.Sorted(slices.Values(jobIDs(w.Jobs()))); !slices.Equal(got, []string{"done", "gang", "svc-web-r0"}) {
		t.Fatalf("view jobs %v, want done, gang and web's queued replica", got)
	}
	if nodes := slices.Sorted(slices.Values(nodeIDs(w.Nodes()))); !slices.Equal(nodes, []string{"n1", "n2"}) {
		t.Fatalf("view nodes %v, want n1 and its peer n2", nodes)
	}
	if got, want := allocIDs(w.NodeLiveAllocs("n1")), allocIDs(h.f.NodeLiveAllocs("n1")); !slices.Equal(got, want) {
		t.Fatalf("live allocations on n1 %v in the view, %v in the state", got, want)
	}
	if got := allocIDs(w.Allocs("gang")); !slices.Equal(got, []string{"gang0", "gang1"}) {
		t.Fatalf("gang's allocations in the view %v, want both ranks", got)
	}
	if !holds(w, "done0") {
		t.Fatal("the finished allocation on n1 is missing from its view (its directory would be swept)")
	}
	if holds(w, "other0") {
		t.Fatal("n3's allocation is in n1's view")
	}
	if _, ok := w.Service("web"); !ok {
		t.Fatal("the view has no services")
	}
	if err := checkIndexes(w.st); err != nil {
		t.Fatalf("the loaded view's indexes: %v", err)
	}
}

func TestNodeView_HashMovesOnlyWithTheView(t *testing.T) {
	h := viewHarness(t)
	_, before := loadView(t, h.f, "n1")

	// Changes n1 does not see: another node's job, the queue.
	h.mustUpdate("n3", "other0", structs.AllocRunning, 0, "")
	h.submit("later", spec(1, 1))
	_, same := loadView(t, h.f, "n1")
	if same.Hash != before.Hash || same.Index == before.Index {
		t.Fatalf("hash %s at %d after changes outside n1's view, want %s at a later index than %d", same.Hash, same.Index, before.Hash, before.Index)
	}

	// A change of n1's own allocation, then of its peer's.
	h.mustUpdate("n1", "gang0", structs.AllocRunning, 0, "")
	_, own := loadView(t, h.f, "n1")
	h.mustUpdate("n2", "gang1", structs.AllocRunning, 0, "")
	_, peer := loadView(t, h.f, "n1")
	if own.Hash == same.Hash || peer.Hash == own.Hash {
		t.Fatal("the view's hash did not move with its allocations")
	}

	// Removing the finished job takes its allocation out of the view.
	if err := h.gc(time.Hour, h.job("done").FinishedAt.Add(time.Hour), "done"); err != nil {
		t.Fatal(err)
	}
	w, gone := loadView(t, h.f, "n1")
	if gone.Hash == peer.Hash || holds(w, "done0") {
		t.Fatal("the removed job's allocation is still in the view")
	}
}

func TestNodeView_UnknownNodeSeesServicesOnly(t *testing.T) {
	h := viewHarness(t)
	w, _ := loadView(t, h.f, "nobody")
	if len(w.Nodes()) != 0 || !slices.Equal(jobIDs(w.Jobs()), []string{"svc-web-r0"}) {
		t.Fatalf("an unknown node's view has nodes %v and jobs %v, want none and web's replica", nodeIDs(w.Nodes()), jobIDs(w.Jobs()))
	}
	if got := slices.Collect(maps.Keys(w.st.services)); !slices.Equal(got, []string{"web"}) {
		t.Fatalf("services %v, want web", got)
	}
}

func TestNodeView_HoldsTheServicesLiveReplicasForTheIngress(t *testing.T) {
	h := viewHarness(t)
	h.place("svc-web-r0", alloc("web0", "n3", 0, gpuID("n3", 1)))
	h.mustUpdate("n3", "web0", structs.AllocRunning, 0, "")
	w, before := loadView(t, h.f, "n1")
	stamp := h.f.NodeViewStamp("n1")

	// What the ingress reads (agent/ingress State), as the state has it.
	if got, want := jobIDs(w.ServiceReplicas("web")), jobIDs(h.f.ServiceReplicas("web")); !slices.Equal(got, want) {
		t.Fatalf("web's replicas in n1's view %v, in the state %v", got, want)
	}
	if got := allocIDs(w.Allocs("svc-web-r0")); !slices.Equal(got, []string{"web0"}) {
		t.Fatalf("the replica's allocations in n1's view %v, want web0", got)
	}
	if n, ok := w.Node("n3"); !ok || n.Addresses != h.f.st.nodes["n3"].Addresses {
		t.Fatalf("the replica's node n3 in n1's view: %v %v", n, ok)
	}
	if holds(w, "other0") || !holds(w, "gang1") {
		t.Fatal("n1's view took in n3's other allocation, or lost its peer's")
	}
	if err := checkIndexes(w.st); err != nil {
		t.Fatalf("the loaded view's indexes: %v", err)
	}

	// The replica's health moves every node's view; its end takes it
	// and its node out, and its job stays while it is to be placed again.
	if err := h.reportHealth("n3", "web0", true, "GET /health: 200"); err != nil {
		t.Fatal(err)
	}
	w, healthy := loadView(t, h.f, "n1")
	if healthy.Hash == before.Hash || h.f.NodeViewStamp("n1") == stamp {
		t.Fatal("the replica's health report left n1's view, or its stamp, as it was")
	}
	stamp = h.f.NodeViewStamp("n1")
	if a, ok := w.Alloc("web0"); !ok || a.Health == nil || !a.Health.Healthy {
		t.Fatalf("the replica's health in n1's view: %+v", a)
	}
	h.mustUpdate("n3", "web0", structs.AllocFailed, 1, "killed")
	w, ended := loadView(t, h.f, "n1")
	if ended.Hash == healthy.Hash || holds(w, "web0") || h.f.NodeViewStamp("n1") == stamp {
		t.Fatal("the ended replica's allocation is still in n1's view, or its stamp did not move")
	}
	if _, ok := w.Node("n3"); ok {
		t.Fatal("n3 stayed in n1's view with no replica on it")
	}
	if got := jobIDs(w.ServiceReplicas("web")); !slices.Equal(got, jobIDs(h.f.ServiceReplicas("web"))) || len(got) != 1 {
		t.Fatalf("web's replicas after one ended: %v in the view, want the state's one", got)
	}

	// A replica whose job ended (its service deleted) leaves the views.
	h.deleteService("web", "done with it")
	if j, ok := h.f.Job("svc-web-r0"); !ok || !j.State.Terminal() {
		t.Fatalf("the deleted service's replica with nothing running: %+v, want it ended", j)
	}
	if w, _ = loadView(t, h.f, "n1"); holds(w, "web0") || len(w.ServiceReplicas("web")) != 0 {
		t.Fatal("the ended replica is still in n1's view")
	}
	if _, ok := w.Job("svc-web-r0"); ok {
		t.Fatal("the ended replica's job is still in n1's view")
	}
}

func TestLoadView_WakesWatchersAndRefusesGarbage(t *testing.T) {
	h := viewHarness(t)
	v, err := h.f.NodeView("n1")
	if err != nil {
		t.Fatal(err)
	}
	w := New(nil)
	_, changed := w.Watch()
	if err := w.LoadView(bytes.NewReader(v.Data)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	default:
		t.Fatal("loading a view woke no watcher")
	}
	before := w.Hash()
	err = w.LoadView(bytes.NewReader([]byte("{\"version\":6}\n{\"type\":\"alloc\",\"alloc\":{\"id\":\"a\",\"job_id\":\"ghost\"}}\n")))
	wantErrIs(t, err, ErrBadSnapshot, "load node view", "unknown job ghost")
	if w.Hash() != before {
		t.Fatal("a refused view changed the state")
	}
}

func TestNodeView_CarriesTheTrustPeersAreCheckedWith(t *testing.T) {
	h := viewHarness(t)
	h.initTrust()
	h.createToken(joinToken("tok", 0))
	h.mustAdmit("tok", "n2")
	h.mustAdmit("tok", "n3")
	if err := h.revokeNode("n3", "stolen"); err != nil {
		t.Fatal(err)
	}
	w, before := loadView(t, h.f, "n1")

	// The trust record, without the users' token hash, which only
	// servers check.
	got, ok := w.Trust()
	want, _ := h.f.Trust()
	want.UserTokenHash = ""
	if !ok || !reflect.DeepEqual(got, want) {
		t.Fatalf("the view's trust %+v, want the state's without the token hash %+v", got, want)
	}
	// The revocations, and nothing else of admission.
	if !w.Revoked("n3") || w.Revoked("n2") {
		t.Fatalf("the view says n3 revoked %v, n2 revoked %v; want n3 only", w.Revoked("n3"), w.Revoked("n2"))
	}
	if adm := w.Admissions(); len(adm) != 1 || adm[0].NodeID != "n3" {
		t.Fatalf("the view's admissions %+v, want n3's revocation only", adm)
	}
	if toks := w.JoinTokens(); len(toks) != 0 {
		t.Fatalf("the view carries %d join tokens", len(toks))
	}

	// Admitting a node and making a token move no node's view; a
	// revocation and a keyring step move every one, known node or not,
	// and their stamps, which servers compare before writing a view.
	_, other := loadView(t, h.f, "nobody")
	stamp, otherStamp := h.f.NodeViewStamp("n1"), h.f.NodeViewStamp("nobody")
	h.createToken(joinToken("tok2", 0))
	h.mustAdmit("tok2", "n4")
	if _, v := loadView(t, h.f, "n1"); v.Hash != before.Hash {
		t.Fatal("an admission and a join token moved the view's hash")
	}
	if err := h.revokeNode("n2", "lost"); err != nil {
		t.Fatal(err)
	}
	w, revoked := loadView(t, h.f, "n1")
	_, otherRevoked := loadView(t, h.f, "nobody")
	if revoked.Hash == before.Hash || otherRevoked.Hash == other.Hash || !w.Revoked("n2") {
		t.Fatal("a revocation did not reach the views")
	}
	if h.f.NodeViewStamp("n1") == stamp || h.f.NodeViewStamp("nobody") == otherStamp {
		t.Fatal("a revocation did not move the views' stamps")
	}
	stamp = h.f.NodeViewStamp("n1")
	h.apply(structs.KeyringType, structs.KeyringRequest{Keyring: structs.Keyring{Primary: "key-1", Next: "key-2", Generation: 2}})
	w, rotated := loadView(t, h.f, "n1")
	if tr, _ := w.Trust(); rotated.Hash == revoked.Hash || tr.Keyring.Generation != 2 || tr.Keyring.Next != "key-2" {
		t.Fatalf("the view holds keyring %+v after a rotation step, want generation 2", tr.Keyring)
	}
	if h.f.NodeViewStamp("n1") == stamp {
		t.Fatal("a keyring step did not move the view's stamp")
	}
}

// A node's view loaded anew while the node reads it: an allocation read
// absent is absent from the state of the index read with it, never from
// an older view while the index is a newer one's (the agent's start,
// where the view goes from empty to the state, once killed a job it ran:
// "not in the cluster's state" at an index past its placement).
func TestAllocAt_TheAbsenceAndTheIndexAreOfOneState(t *testing.T) {
	h := viewHarness(t)
	full, err := h.f.NodeView("n1")
	if err != nil {
		t.Fatal(err)
	}
	empty, err := New(nil).NodeView("n1")
	if err != nil {
		t.Fatal(err)
	}
	a, ok := h.f.Alloc("gang0")
	if !ok {
		t.Fatal("no gang0 in the state")
	}
	placed := a.CreateIndex
	w := New(nil)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			v := []NodeView{empty, full}[i%2]
			if err := w.LoadView(bytes.NewReader(v.Data)); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for range 20000 {
		if _, ok, index := w.AllocAt("gang0"); !ok && index >= placed {
			t.Errorf("gang0 read absent at index %d, past its placement at %d", index, placed)
			break
		}
	}
	close(stop)
	<-done
}

// holds reports whether f holds the allocation id, live or not.
func holds(f *FSM, id string) bool {
	_, ok := f.Alloc(id)
	return ok
}
