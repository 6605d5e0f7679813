package agent

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"os/exec"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/skein-dev/skein/agent/leader"
	"github.com/skein-dev/skein/structs"
)

// Mail program bounds: one run's time, and how many mails wait their
// turn (a mail past them is dropped, with a warning, rather than hold
// the leader).
const (
	mailTimeout = 30 * time.Second
	mailQueue   = 64
)

// mailer runs the node's --mail-prog for a job's mail, as Slurm runs its
// MailProg: PROG -s SUBJECT USER, the body on stdin. Only the leader
// sends (leader.Config.Mail). Mails go out one at a time, in the order
// of their events, so that a job's Began never arrives after its Ended.
type mailer struct {
	prog string
	log  hclog.Logger

	mu      sync.Mutex
	queue   []leader.Mail
	sending bool // a goroutine is working through the queue
}

func newMailer(prog string, log hclog.Logger) *mailer {
	return &mailer{prog: prog, log: log}
}

// send queues one mail, to go out after those before it; it never
// blocks.
func (m *mailer) send(ml leader.Mail) {
	if mailTo(ml.Job) == "" {
		m.log.Debug("mail without an address: the job names no --mail-user and has no owner", "job", ml.Job.SlurmID())
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.queue) >= mailQueue {
		m.log.Warn("mail dropped: the mail program is behind", "job", ml.Job.SlurmID(), "event", ml.Event.Kind, "waiting", len(m.queue))
		return
	}
	m.queue = append(m.queue, ml)
	if !m.sending {
		m.sending = true
		go m.drain()
	}
}

// drain sends the queued mails in order until none is left.
func (m *mailer) drain() {
	for {
		m.mu.Lock()
		if len(m.queue) == 0 {
			m.sending = false
			m.mu.Unlock()
			return
		}
		ml := m.queue[0]
		m.queue = m.queue[1:]
		m.mu.Unlock()
		m.run(ml)
	}
}

// run runs the mail program for one mail.
func (m *mailer) run(ml leader.Mail) {
	subject, body := mailText(ml)
	ctx, cancel := context.WithTimeout(context.Background(), mailTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, m.prog, "-s", subject, mailTo(ml.Job))
	cmd.Stdin = bytes.NewReader([]byte(body))
	if out, err := cmd.CombinedOutput(); err != nil {
		m.log.Warn("mail program failed", "program", m.prog, "job", ml.Job.SlurmID(), "error", err, "output", truncateOutput(out))
	}
}

// mailTo is where a job's mail goes: its --mail-user, else its owner.
func mailTo(j *structs.Job) string { return cmp.Or(j.Spec.MailUser, j.Owner) }

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
	// The job is as the leader found it when it mailed: the end is said
	// for the event that ended it, not for a Began sent late.
	ends := ml.Event.Kind == structs.EventJobSucceeded || ml.Event.Kind == structs.EventJobFailed ||
		ml.Event.Kind == structs.EventJobTimedOut || ml.Event.Kind == structs.EventJobCancelled
	if ends && j.State.Terminal() {
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
