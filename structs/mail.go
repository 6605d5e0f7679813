package structs

import (
	"slices"
	"strings"
	"unicode"
)

// Mail types, as Slurm's --mail-type names them: the events of a job a
// mail is sent for (by the program the agents' --mail-prog names).
const (
	MailBegin         = "BEGIN"          // the job started
	MailEnd           = "END"            // it ended, however it ended
	MailFail          = "FAIL"           // it failed
	MailRequeue       = "REQUEUE"        // it was restarted or preempted
	MailTimeLimit     = "TIME_LIMIT"     // it reached its time limit
	MailInvalidDepend = "INVALID_DEPEND" // its dependency can never be met
	MailArrayTasks    = "ARRAY_TASKS"    // an array's tasks each send their own
	MailAll           = "ALL"            // BEGIN, END, FAIL, REQUEUE, TIME_LIMIT, INVALID_DEPEND
	MailNone          = "NONE"
)

// MailTypes are the mail types a spec may name.
var MailTypes = []string{MailNone, MailBegin, MailEnd, MailFail, MailRequeue, MailTimeLimit, MailInvalidDepend, MailArrayTasks, MailAll}

// MaxMailUserLen bounds a spec's mail_user.
const MaxMailUserLen = 256

// validateMail checks mail_type and mail_user: known types, and an
// address that is one word the mail program cannot take for an option.
func (s *JobSpec) validateMail() error {
	for _, t := range s.MailType {
		if !slices.Contains(MailTypes, t) {
			return fieldErr("mail_type", "%q: want some of %s", t, strings.Join(MailTypes, ", "))
		}
	}
	u := s.MailUser
	switch {
	case len(u) > MaxMailUserLen:
		return fieldErr("mail_user", "longer than %d bytes", MaxMailUserLen)
	case strings.HasPrefix(u, "-"):
		return fieldErr("mail_user", "%q starts with '-'", u)
	case strings.ContainsFunc(u, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }):
		return fieldErr("mail_user", "%q holds white space or a control character", u)
	}
	return nil
}

// MailFor reports whether a job whose spec names types wants mail for
// the event kind (reason: the event's), as Slurm's --mail-type does.
func MailFor(types []string, kind EventKind, reason string) bool {
	want := func(t string) bool {
		return slices.Contains(types, t) || slices.Contains(types, MailAll) && t != MailArrayTasks
	}
	switch kind {
	case EventJobStarted:
		return want(MailBegin)
	case EventJobSucceeded:
		return want(MailEnd)
	case EventJobFailed:
		return want(MailEnd) || want(MailFail)
	case EventJobTimedOut:
		return want(MailEnd) || want(MailTimeLimit)
	case EventJobCancelled:
		return want(MailEnd) || want(MailInvalidDepend) && strings.Contains(reason, "never satisfied")
	case EventJobRestarted, EventJobPreempted:
		return want(MailRequeue)
	}
	return false
}
