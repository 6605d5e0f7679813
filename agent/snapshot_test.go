package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// liveAlloc returns the live allocation of job id, as agent a's state
// holds it.
func liveAlloc(t *testing.T, a *Agent, id string) *structs.Allocation {
	t.Helper()
	for _, al := range a.fsm.Allocs(id) {
		if al.Live() {
			return al
		}
	}
	t.Fatalf("job %s has no live allocation", id)
	return nil
}

// A backup is saved, then a job is submitted and a token made; the
// backup is restored: every server holds the backup's state (the job
// and the token made since are gone, and the job's process is stopped),
// the job that ran at the backup still runs as the same allocation,
// once, a user's token of the backup works again, and the cluster takes
// new work.
func TestCluster_SnapshotSaveThenRestore_BringsBackTheStateAndNodesFollowIt(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 3)
	ctx := context.Background()
	c := tc.client(tc.agents[0])
	alice, err := c.CreateACLToken(ctx, api.ACLTokenCreateRequest{User: "alice", Role: structs.RoleSubmitter})
	if err != nil {
		t.Fatal(err)
	}
	kept := tc.submit(tc.agents[0], structs.JobSpec{Name: "kept", Nodes: 1, GPUs: 1, Command: []string{"sleep", "600"}})
	waitJob(t, tc.agents[0], kept.ID, jobState(structs.JobRunning))
	keptAlloc := liveAlloc(t, tc.agents[0], kept.ID)

	// A backup holds secrets: a submitter may neither take one nor
	// restore one.
	var apiErr *api.Error
	asAlice := clientFor(t, tc.agents[1], alice.Token)
	if _, err := asAlice.SaveSnapshot(ctx, &bytes.Buffer{}); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusForbidden {
		t.Fatalf("a submitter's snapshot save: %v, want 403", err)
	}
	var backup bytes.Buffer
	index, err := c.SaveSnapshot(ctx, &backup)
	if err != nil {
		t.Fatalf("save: %v", err)
	}
	sum, err := InspectSnapshot(bytes.NewReader(backup.Bytes()))
	if err != nil || sum.Index != index || sum.Jobs[structs.JobRunning] != 1 || sum.ACLTokens < 2 || !sum.ACL {
		t.Fatalf("inspect: %+v, %v; want index %d, 1 running job, the admin's and alice's tokens", sum, err, index)
	}

	// After the backup: a job that runs, a token.
	later, err := c.SubmitJob(ctx, api.SubmitRequest{RequestID: structs.NewID(), Spec: structs.JobSpec{Name: "later", Nodes: 1, GPUs: 1, Command: []string{"sleep", "600"}}})
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, tc.agents[0], later.ID, jobState(structs.JobRunning))
	laterAlloc := liveAlloc(t, tc.agents[0], later.ID)
	laterNode := tc.agentOf(t, laterAlloc.NodeID)
	bob, err := c.CreateACLToken(ctx, api.ACLTokenCreateRequest{User: "bob", Role: structs.RoleSubmitter})
	if err != nil {
		t.Fatal(err)
	}

	if _, err := asAlice.RestoreSnapshot(ctx, backup.Bytes()); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusForbidden {
		t.Fatalf("a submitter's restore: %v, want 403", err)
	}
	// A damaged backup is refused, and changes nothing.
	if _, err := tc.client(tc.agents[1]).RestoreSnapshot(ctx, backup.Bytes()[:backup.Len()/2]); err == nil || !strings.Contains(err.Error(), "invalid snapshot") {
		t.Fatalf("restore of half a backup: %v, want refused as invalid", err)
	}
	if _, ok := tc.agents[0].fsm.Job(later.ID); !ok {
		t.Fatal("a refused restore changed the state")
	}

	// Through a node that does not lead.
	restored, err := tc.client(tc.agents[tc.followerBut()]).RestoreSnapshot(ctx, backup.Bytes())
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	if restored.Index <= index {
		t.Fatalf("restored at index %d, not past the backup's %d", restored.Index, index)
	}
	testutil.WaitFor(t, 20*time.Second, func() error {
		for _, a := range tc.live() {
			if _, ok := a.fsm.Job(later.ID); ok {
				return fmt.Errorf("%s still holds the job submitted after the backup", a.Name())
			}
			if a.fsm.Index() < restored.Index {
				return fmt.Errorf("%s at index %d, before the restore's %d", a.Name(), a.fsm.Index(), restored.Index)
			}
		}
		return nil
	})
	// The later job's process is stopped: the state never placed it.
	testutil.WaitFor(t, 20*time.Second, func() error {
		if slices.Contains(laterNode.runner.Tracked(), laterAlloc.ID) {
			return fmt.Errorf("%s still runs allocation %s of the job submitted after the backup", laterNode.Name(), laterAlloc.ID)
		}
		return nil
	})
	// The kept job runs on as the same allocation, never started again.
	time.Sleep(time.Second) // time for a wrong restart to show
	j, _ := tc.agents[0].fsm.Job(kept.ID)
	if j.State != structs.JobRunning || j.Attempts != 1 {
		t.Fatalf("kept job %s, attempt %d (%s)", j.State, j.Attempts, j.Reason)
	}
	if al := liveAlloc(t, tc.agents[0], kept.ID); al.ID != keptAlloc.ID || al.State != structs.AllocRunning {
		t.Fatalf("kept job's allocation %s %s, want %s running", al.ID, al.State, keptAlloc.ID)
	}
	if keptNode := tc.agentOf(t, keptAlloc.NodeID); !slices.Contains(keptNode.runner.Tracked(), keptAlloc.ID) {
		t.Fatalf("%s no longer runs the kept job", keptNode.Name())
	}
	// Tokens: alice's (in the backup) works, bob's (made after) does not.
	if _, err := clientFor(t, tc.agents[2], alice.Token).WhoAmI(ctx); err != nil {
		t.Errorf("alice's token after the restore: %v", err)
	}
	if _, err := clientFor(t, tc.agents[2], bob.Token).WhoAmI(ctx); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnauthorized {
		t.Errorf("bob's token, made after the backup: %v, want refused", err)
	}
	// New work runs.
	next := tc.submit(tc.agents[2], structs.JobSpec{Name: "next", Nodes: 1, GPUs: 1, Command: []string{"true"}})
	waitJob(t, tc.agents[0], next.ID, jobState(structs.JobSucceeded))
	tc.checkInvariants()
}

// A server with --snapshot-every writes its backups, mode 0600, each one
// whole (inspect reads it), and keeps the newest --snapshot-keep.
func TestAgent_PeriodicSnapshotsKeepTheNewest(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, t.TempDir())
	cfg.SnapshotEvery = 200 * time.Millisecond
	cfg.SnapshotKeep = 2
	a, c := startAgent(t, cfg)
	submit(t, c, 0, "true")
	dir := filepath.Join(cfg.DataDir, "snapshots")
	seen := map[string]bool{}
	var entries []os.DirEntry
	testutil.WaitFor(t, 20*time.Second, func() error {
		var err error
		if entries, err = os.ReadDir(dir); err != nil {
			return err
		}
		for _, e := range entries {
			seen[e.Name()] = true
		}
		if len(seen) < 4 || len(entries) != 2 {
			return fmt.Errorf("%d backups written so far, %d in %s now", len(seen), len(entries), dir)
		}
		return nil
	})
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", e.Name(), info.Mode().Perm())
		}
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		sum, err := InspectSnapshot(f)
		f.Close()
		if err != nil || sum.Index == 0 || sum.Index > a.fsm.Index() {
			t.Errorf("%s: %+v, %v", e.Name(), sum, err)
		}
	}
}

// A backup of one secure cluster is refused by another: its trust state
// (the CA, the keyring, the admissions) is not that cluster's.
func TestSecure_SnapshotRestore_RefusesABackupOfAnotherCluster(t *testing.T) {
	t.Parallel()
	one, other := startSecureCluster(t, 1), startSecureCluster(t, 1)
	ctx := context.Background()
	var backup bytes.Buffer
	if _, err := one.client(one.agents[0]).SaveSnapshot(ctx, &backup); err != nil {
		t.Fatal(err)
	}
	before := other.agents[0].fsm.Hash()
	_, err := other.client(other.agents[0]).RestoreSnapshot(ctx, backup.Bytes())
	var apiErr *api.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusConflict || !strings.Contains(err.Error(), "not of this cluster") {
		t.Fatalf("restore of another cluster's backup: %v, want 409 naming it", err)
	}
	if other.agents[0].fsm.Hash() != before {
		t.Fatal("a refused restore changed the state")
	}
}
