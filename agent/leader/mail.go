package leader

import (
	"slices"

	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/structs"
)

// Mail is one mail a job's --mail-type asks for: the job as the leader
// found it when it came to the event (later events may have moved it
// on), and the event.
type Mail struct {
	Job   *structs.Job
	Event structs.Event
}

// mailLoop hands Config.Mail each job event a job's --mail-type asks for,
// in order, until stop closes. It starts after the newest event in the
// log when this node took office: those before were an earlier leader's
// to send. A task of an array mails only with ARRAY_TASKS, as in Slurm,
// where an array mails once (here: its first task).
func (l *Leader) mailLoop(stop <-chan struct{}) {
	if l.cfg.Mail == nil {
		return
	}
	var after structs.EventCursor
	for {
		page := l.fsm.Events(fsm.EventQuery{After: after})
		after = page.Next
		if len(page.Events) < fsm.MaxEventsPage {
			break
		}
	}
	for {
		page := l.fsm.Events(fsm.EventQuery{After: after})
		after = page.Next
		for i := range page.Events {
			e := page.Events[i]
			if e.Job == "" {
				continue
			}
			j, ok := l.fsm.Job(e.Job)
			if !ok || len(j.Spec.MailType) == 0 || !structs.MailFor(j.Spec.MailType, e.Kind, e.Reason) {
				continue
			}
			if j.ArrayID != "" && j.ArrayNumber != j.Number && !slices.Contains(j.Spec.MailType, structs.MailArrayTasks) {
				continue
			}
			l.cfg.Mail(Mail{Job: j, Event: e})
		}
		if len(page.Events) > 0 && len(page.Events) == fsm.MaxEventsPage {
			continue // more already
		}
		select {
		case <-stop:
			return
		case <-page.Changed:
		}
	}
}
