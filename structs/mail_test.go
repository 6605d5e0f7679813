package structs

import (
	"strings"
	"testing"
)

func TestMailFor_TheEventsEachTypeAsksFor(t *testing.T) {
	for _, tc := range []struct {
		types  []string
		kind   EventKind
		reason string
		want   bool
	}{
		{[]string{MailBegin}, EventJobStarted, "", true},
		{[]string{MailBegin}, EventJobSucceeded, "", false},
		{[]string{MailEnd}, EventJobSucceeded, "", true},
		{[]string{MailEnd}, EventJobCancelled, "", true},
		{[]string{MailFail}, EventJobFailed, "", true},
		{[]string{MailFail}, EventJobSucceeded, "", false},
		{[]string{MailTimeLimit}, EventJobTimedOut, "", true},
		{[]string{MailRequeue}, EventJobRestarted, "", true},
		{[]string{MailInvalidDepend}, EventJobCancelled, "dependency 3f2a failed: never satisfied (afterok)", true},
		{[]string{MailInvalidDepend}, EventJobCancelled, "cancelled by user", false},
		{[]string{MailAll}, EventJobStarted, "", true},
		{[]string{MailAll}, EventJobPlaced, "", false},
		{nil, EventJobFailed, "", false},
	} {
		if got := MailFor(tc.types, tc.kind, tc.reason); got != tc.want {
			t.Errorf("MailFor(%v, %s, %q) = %v, want %v", tc.types, tc.kind, tc.reason, got, tc.want)
		}
	}
}

func TestJobSpec_MailFieldsAreChecked(t *testing.T) {
	for _, tc := range []struct {
		spec JobSpec
		want string
	}{
		{JobSpec{MailType: []string{"END", "SOMETIMES"}}, `mail_type: "SOMETIMES": want some of`},
		{JobSpec{MailUser: "-oProxyCommand=x"}, "mail_user: \"-oProxyCommand=x\" starts with '-'"},
		{JobSpec{MailUser: "a@b\nBcc: c@d"}, "mail_user:"},
		{JobSpec{MailUser: strings.Repeat("a", MaxMailUserLen+1)}, "mail_user: longer than 256 bytes"},
	} {
		s := tc.spec
		s.Command, s.Nodes = []string{"x"}, 1
		if err := s.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error with %q", tc.spec.MailType, err, tc.want)
		}
	}
}
