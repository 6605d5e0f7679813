package node

import (
	"fmt"
	"hash/fnv"
	"net"
	"strconv"

	"github.com/skein-dev/skein/structs"
)

func portHash(jobID string, attempt int) uint32 {
	h := fnv.New32a()
	fmt.Fprintf(h, "%s/%d", jobID, attempt)
	return h.Sum32()
}

// legacyMasterPort is the rendezvous port of an allocation committed
// without one (by a leader from before ports were stamped): spread over
// 29500-39499 by job and attempt, the same on every rank.
func legacyMasterPort(jobID string, attempt int) int {
	return 29500 + int(portHash(jobID, attempt)%10000)
}

// masterPortOf is the MASTER_PORT of an allocation's gang.
func masterPortOf(alloc *structs.Allocation) int {
	if alloc.MasterPort != 0 {
		return alloc.MasterPort
	}
	return legacyMasterPort(alloc.JobID, alloc.Attempt)
}

// checkMasterPortFree makes sure, on rank 0's node, that a process skein
// does not run does not hold the gang's MASTER_PORT: it binds the port on
// every address for a moment. A port taken between this check and the
// job's own bind still fails the job, as it would without skein.
func checkMasterPortFree(port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("MASTER_PORT %d is in use on this node by a program skein does not run: %w", port, err)
	}
	return l.Close()
}
