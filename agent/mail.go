package agent

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"os/exec"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/skein-dev/skein/agent/leader"
	"github.com/skein-dev/skein/structs"
)

// Mail program bounds: one run's time, and how many run at once (a mail
// past them is dropped, with a warning, rather than hold the leader).
const (
	mailTimeout = 30 * time.Second
	mailWorkers = 4
)

// mailer runs the node's --mail-prog for a job's mail, as Slurm runs its
// MailProg: PROG -s SUBJECT USER, the body on stdin. Only the leader
// sends (leader.Config.Mail).
type mailer struct {
	prog  string
	log   hclog.Logger
	slots chan struct{}
}

func newMailer(prog string, log hclog.Logger) *mailer {
	return &mailer{prog: prog, log: log, slots: make(chan struct{}, mailWorkers)}
}

// send runs the program for one mail in the background; it never
// blocks.
func (m *mailer) send(ml leader.Mail) {
	user := cmp.Or(ml.Job.Spec.MailUser, ml.Job.Owner)
	if user == "" {
		m.log.Debug("mail without an address: the job names no --mail-user and has no owner", "job", ml.Job.SlurmID())
		return
	}
	select {
	case m.slots <- struct{}{}:
	default:
		m.log.Warn("mail dropped: the mail program is busy", "job", ml.Job.SlurmID(), "event", ml.Event.Kind)
		return
	}
	subject, body := mailText(ml)
	go func() {
		defer func() { <-m.slots }()
		ctx, cancel := context.WithTimeout(context.Background(), mailTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, m.prog, "-s", subject, user)
		cmd.Stdin = bytes.NewReader([]byte(body))
		if out, err := cmd.CombinedOutput(); err != nil {
			m.log.Warn("mail program failed", "program", m.prog, "job", ml.Job.SlurmID(), "error", err, "output", truncateOutput(out))
		}
	}()
}

// mailText is a mail's subject, as Slurm's ("Slurm Job_id=12 Name=train
// Ended, Run time 00:10:00, COMPLETED, ExitCode 0" with skein for
// Slurm), and its body: why, in skein's words.
func mailText(ml leader.Mail) (subject, body string) {
	j := ml.Job
	what := map[structs.EventKind]string{
		structs.EventJobStarted: "Began", structs.EventJobSucceeded: "Ended", structs.EventJobFailed: "Failed",
		structs.EventJobTimedOut: "Reached time limit", structs.EventJobCancelled: "Cancelled",
		structs.EventJobRestarted: "Requeued", structs.EventJobPreempted: "Preempted",
	}[ml.Event.Kind]
	subject = fmt.Sprintf("skein Job_id=%s Name=%s %s", j.SlurmID(), j.Spec.Name, what)
	if j.State.Terminal() {
		run := time.Duration(0)
		if !j.StartedAt.IsZero() {
			run = j.FinishedAt.Sub(j.StartedAt).Truncate(time.Second)
		}
		subject += fmt.Sprintf(", Run time %s, %s, ExitCode %d", run, j.State, j.ExitCode)
	}
	body = fmt.Sprintf("job %s (%s): %s\n", j.SlurmID(), j.ID, cmp.Or(ml.Event.Reason, string(ml.Event.Kind)))
	return subject, body
}

// truncateOutput keeps a log line small.
func truncateOutput(out []byte) string {
	if len(out) > 200 {
		return string(out[:200]) + "..."
	}
	return string(out)
}

// mailFunc is what the leader hands jobs' mail to: the node's
// --mail-prog, or nothing without one.
func (a *Agent) mailFunc() func(leader.Mail) {
	if a.cfg.MailProg == "" {
		return nil
	}
	return newMailer(a.cfg.MailProg, a.logger.Named("mail")).send
}
