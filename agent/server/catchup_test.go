package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

// A job submitted through the leader that a follower has not applied yet:
// a signal for it through the follower waits until the follower has
// applied it, and the follower answers as it would for any job it knows
// (here the job runs nowhere yet), not "no such job". A job the leader
// does not know either is not waited for.
func TestCatchUp_AFollowerAnswersForAJobItAppliesLate(t *testing.T) {
	leader := startBusyNode(t, "leader", "leader", "", 0)
	follower := startBusyNode(t, "follower", "leader", leader.url, 0)
	leader.log.release <- struct{}{}
	code, _, body := post(t, http.MethodPost, leader.url+"/v1/jobs", submitBody("late"))
	if code != http.StatusOK && code != http.StatusCreated {
		t.Fatalf("submit: %d %s", code, body)
	}
	<-leader.log.entered
	job, ok := leader.log.f.JobByRequestID("late")
	if !ok {
		t.Fatal("the leader has no job")
	}

	code, _, body = post(t, http.MethodPost, follower.url+"/v1/jobs/not-a-job/signal", api.SignalRequest{Signal: "USR1"})
	if code != http.StatusNotFound {
		t.Fatalf("signal of a job no node knows: %d %s; want 404", code, body)
	}

	applied := make(chan error, 1)
	go func() {
		time.Sleep(300 * time.Millisecond) // the follower applies the job late
		follower.log.release <- struct{}{}
		_, err := follower.log.apply(structs.JobSubmitType, structs.JobSubmitRequest{
			RequestID: job.RequestID, JobID: job.ID, Spec: job.Spec, SubmittedAt: job.SubmittedAt, Owner: job.Owner})
		applied <- err
	}()
	code, _, body = post(t, http.MethodPost, follower.url+"/v1/jobs/"+job.ID+"/signal", api.SignalRequest{Signal: "USR1"})
	if err := <-applied; err != nil {
		t.Fatal(err)
	}
	var e api.ErrorBody
	if err := json.Unmarshal([]byte(body), &e); err != nil || code != http.StatusConflict || !strings.Contains(e.Error, "running") {
		t.Fatalf("signal through the follower of a job it applied late: %d %s; want 409, the job runs nowhere yet", code, body)
	}
}
