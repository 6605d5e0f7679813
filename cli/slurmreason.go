package cli

import (
	"strings"
	"time"

	"github.com/skein-dev/skein/structs"
)

// Slurm's reason codes for a pending job, as squeue's REASON and
// scontrol's Reason= show them; skein job keeps skein's sentence.
const (
	reasonCodeNone         = "None"
	reasonCodeResources    = "Resources"
	reasonCodePriority     = "Priority"
	reasonCodeDependency   = "Dependency"
	reasonCodeNeverSatisfy = "DependencyNeverSatisfied"
	reasonCodeHeld         = "JobHeldUser"
	reasonCodeBeginTime    = "BeginTime"
	reasonCodeArrayLimit   = "JobArrayTaskLimit"
	reasonCodeGPULimit     = "QOSMaxGRESPerUser"
	reasonCodePartition    = "PartitionConfig"
	reasonCodeNodeList     = "ReqNodeNotAvail"
)

// reasonCodes map what skein's scheduler says of a waiting job to
// Slurm's code, by the words its sentence starts with or holds; the
// first that matches wins.
var reasonCodes = []struct {
	prefix, contains, code string
}{
	{prefix: "held", code: reasonCodeHeld},
	{contains: "never satisfied", code: reasonCodeNeverSatisfy},
	{prefix: "dependency ", contains: "does not exist", code: reasonCodeNeverSatisfy},
	{prefix: "waiting for job ", code: reasonCodeDependency},
	{prefix: "array ", contains: "runs its limit of", code: reasonCodeArrayLimit},
	{prefix: "waiting: ", contains: "GPU limit", code: reasonCodeGPULimit},
	{contains: "reserved for higher-priority job", code: reasonCodePriority},
	{contains: "is preempting lower-priority jobs", code: reasonCodePriority},
	{contains: "not in partition", code: reasonCodePartition},
	{contains: "the job's nodelist", code: reasonCodeNodeList},
	{contains: "the job's exclude list", code: reasonCodeNodeList},
}

// slurmReason is the Slurm reason code of a pending job: why it waits,
// from its reason and when it may start.
func slurmReason(j *structs.Job, now time.Time) string {
	if j.Held {
		return reasonCodeHeld
	}
	if j.NotBefore.After(now) {
		return reasonCodeBeginTime
	}
	r := j.Reason
	if r == "" {
		return reasonCodeNone
	}
	for _, m := range reasonCodes {
		if strings.HasPrefix(r, m.prefix) && strings.Contains(r, m.contains) {
			return m.code
		}
	}
	return reasonCodeResources
}
