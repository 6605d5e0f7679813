package agent

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

func TestAgent_MasterPortHeldByAnotherProgramFailsTheJobClearly(t *testing.T) {
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	cfg := testConfig(t, t.TempDir())
	cfg.MasterPorts = structs.PortRange{Min: port, Max: port}
	_, c := startAgent(t, cfg)

	job, err := c.SubmitJob(context.Background(), api.SubmitRequest{Spec: structs.JobSpec{Command: []string{"true"}}})
	if err != nil {
		t.Fatal(err)
	}
	d := waitJobState(t, c, job.ID, structs.JobFailed)
	want := "start failed: MASTER_PORT " + strconv.Itoa(port) + " is in use on this node by a program skein does not run"
	if !strings.HasPrefix(d.Job.Reason, want) {
		t.Fatalf("reason %q, want it to start with %q", d.Job.Reason, want)
	}

	l.Close()
	job = submit(t, c, 0, "sh", "-c", "echo $MASTER_PORT")
	waitJobState(t, c, job.ID, structs.JobSucceeded)
	if got := logs(t, c, job.ID, api.StreamStdout); got != strconv.Itoa(port)+"\n" {
		t.Fatalf("job saw MASTER_PORT %q, want %d", got, port)
	}
}
