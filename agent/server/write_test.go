package server

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/structs"
)

// The one path of a write, through HTTP: a node that does not lead refuses
// what it can check itself, and passes the rest on to the leader, whose
// answer it relays.
func TestWrite_AFollowerRefusesABadWriteItselfAndPassesAGoodOneOn(t *testing.T) {
	leader := startBusyNode(t, "a", "a", "", 0)
	follower := startBusyNode(t, "b", "a", leader.url, 0)

	bad := structs.PartitionSetRequest{Partition: structs.Partition{Name: "gpu", MaxNodes: -1}}
	if code, _, body := post(t, http.MethodPost, follower.url+"/v1/partitions", bad); code != http.StatusBadRequest || !strings.Contains(body, "max_nodes") {
		t.Errorf("a bad partition through the follower: %d %s, want 400 naming max_nodes", code, body)
	}
	if code, _, body := post(t, http.MethodDelete, follower.url+"/v1/jobs/nope", nil); code != http.StatusNotFound {
		t.Errorf("cancel of no job through the follower: %d %s, want 404", code, body)
	}
	if n := len(leader.log.entered); n != 0 {
		t.Fatalf("the leader took %d writes of requests the follower refuses", n)
	}

	leader.log.release <- struct{}{}
	good := structs.PartitionSetRequest{Partition: structs.Partition{Name: "gpu", MaxNodes: 2}}
	code, _, body := post(t, http.MethodPost, follower.url+"/v1/partitions", good)
	if code != http.StatusOK || !strings.Contains(body, `"name": "gpu"`) {
		t.Fatalf("a partition through the follower: %d %s, want 200 with the leader's answer", code, body)
	}
	<-leader.log.entered
	if p, ok := leader.log.f.Partition("gpu"); !ok || p.MaxNodes != 2 {
		t.Errorf("the leader's state holds %+v (%v), want gpu of max_nodes 2", p, ok)
	}
	if _, ok := follower.log.f.Partition("gpu"); ok {
		t.Error("the follower applied the write itself")
	}
}

// A job the leader has committed and a follower has not applied yet (a
// client that submits through the follower and asks at once) is answered
// by the leader: the follower passes a read or a write that misses it on.
func TestJobs_AFollowerThatDoesNotKnowAJobYetAsksTheLeader(t *testing.T) {
	leader := startBusyNode(t, "a", "a", "", 0)
	follower := startBusyNode(t, "b", "a", leader.url, 0)
	leader.log.release <- struct{}{}
	if _, err := leader.log.apply(structs.JobSubmitType, structs.JobSubmitRequest{JobID: "0123456789abcdef0123456789abcdef",
		Spec: structs.JobSpec{Name: "fresh", Command: []string{"true"}, Nodes: 1}, SubmittedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	<-leader.log.entered
	if code, _, body := post(t, http.MethodGet, follower.url+"/v1/jobs/0123456789ab", nil); code != http.StatusOK || !strings.Contains(body, `"fresh"`) {
		t.Errorf("a job only the leader knows, through the follower: %d %s, want 200 with the job", code, body)
	}
	if code, _, body := post(t, http.MethodGet, follower.url+"/v1/jobs/fedcba987654", nil); code != http.StatusNotFound {
		t.Errorf("a job no node knows, through the follower: %d %s, want 404", code, body)
	}
}
