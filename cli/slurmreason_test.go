package cli

import (
	"testing"
	"time"

	"github.com/skein-dev/skein/structs"
)

func TestSlurmReason_SkeinsSentencesAsSlurmsCodes(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		job  structs.Job
		want string
	}{
		{structs.Job{}, "None"},
		{structs.Job{Reason: "first in line: 8 GPUs on 1 node reserved for when running jobs without a time limit end; 1 node: not enough free GPUs"}, "Resources"},
		{structs.Job{Reason: "2 nodes: not enough free GPUs"}, "Resources"},
		{structs.Job{Reason: "1 node: reserved for higher-priority job big from ~12:30 UTC"}, "Priority"},
		{structs.Job{Reason: "waiting: job abc (priority 10) is preempting lower-priority jobs to run first"}, "Priority"},
		{structs.Job{Reason: "waiting for job 3f2a (running)"}, "Dependency"},
		{structs.Job{Reason: "waiting for job 3f2a (running): singleton, of the same name nightly and user"}, "Dependency"},
		{structs.Job{Reason: "dependency 3f2a does not exist"}, "DependencyNeverSatisfied"},
		{structs.Job{Reason: "array dcbb runs its limit of 4 tasks"}, "JobArrayTaskLimit"},
		{structs.Job{Reason: "waiting: alice's GPU limit (8) is in use"}, "QOSMaxGRESPerUser"},
		{structs.Job{Reason: "3 nodes: not in partition long"}, "PartitionConfig"},
		{structs.Job{Reason: "2 nodes: not in the job's nodelist"}, "ReqNodeNotAvail"},
		{structs.Job{Reason: "1 node: excluded by the job's exclude list"}, "ReqNodeNotAvail"},
		{structs.Job{Held: true, Reason: "anything"}, "JobHeldUser"},
		{structs.Job{NotBefore: now.Add(time.Hour), Reason: "waiting for its begin time"}, "BeginTime"},
	} {
		if got := slurmReason(&tc.job, now); got != tc.want {
			t.Errorf("reason %q (held %v): %s, want %s", tc.job.Reason, tc.job.Held, got, tc.want)
		}
	}
}
