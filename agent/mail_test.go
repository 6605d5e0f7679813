package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/skein-dev/skein/agent/leader"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// A job's mails go out in the order of its events, one after another,
// even when the mail program takes longer over the first: a Began mail
// never arrives after the Ended one.
func TestMailer_SendsInTheOrderOfTheEvents(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mails := filepath.Join(dir, "mails")
	prog := filepath.Join(dir, "mailprog")
	script := "#!/bin/sh\ncase \"$2\" in *Began*) sleep 0.3;; esac\necho \"$2\" >>" + mails + "\n"
	if err := os.WriteFile(prog, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	m := newMailer(prog, hclog.NewNullLogger())
	job := &structs.Job{ID: "0123456789abcdef0123456789abcdef", Number: 7, Owner: "alice", State: structs.JobSucceeded,
		Spec: structs.JobSpec{Name: "train"}}
	kinds := []structs.EventKind{structs.EventJobStarted, structs.EventJobRestarted, structs.EventJobSucceeded}
	for _, k := range kinds {
		m.send(leader.Mail{Job: job, Event: structs.Event{Kind: k, Job: job.ID}})
	}
	want := "skein Job_id=7 Name=train Began\nskein Job_id=7 Name=train Requeued\nskein Job_id=7 Name=train Ended, Run time 0s, succeeded, ExitCode 0\n"
	testutil.WaitFor(t, 10*time.Second, func() error {
		got, _ := os.ReadFile(mails)
		if string(got) != want {
			return fmt.Errorf("mails %q, want %q", got, want)
		}
		return nil
	})
}

// The subject of a mail says how the job ended only for the event that
// ended it: a Began mail sent after the job has finished says Began.
func TestMailText_NamesTheEndOnlyForTheEndingEvent(t *testing.T) {
	job := &structs.Job{ID: "0123456789abcdef0123456789abcdef", Number: 7, State: structs.JobFailed, ExitCode: 3,
		StartedAt: time.Unix(100, 0), FinishedAt: time.Unix(165, 0), Spec: structs.JobSpec{Name: "train"}}
	for kind, want := range map[structs.EventKind]string{
		structs.EventJobStarted: "skein Job_id=7 Name=train Began",
		structs.EventJobFailed:  "skein Job_id=7 Name=train Failed, Run time 1m5s, failed, ExitCode 3",
	} {
		if subject, _ := mailText(leader.Mail{Job: job, Event: structs.Event{Kind: kind}}); subject != want {
			t.Errorf("%s: subject %q, want %q", kind, subject, want)
		}
	}
	if _, body := mailText(leader.Mail{Job: job, Event: structs.Event{Kind: structs.EventJobFailed, Reason: "exit code 3"}}); !strings.Contains(body, "exit code 3") {
		t.Errorf("body %q does not say why", body)
	}
}
