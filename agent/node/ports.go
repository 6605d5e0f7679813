package node

import (
	"fmt"
	"net"
	"strconv"

	"github.com/skein-dev/skein/sched"
	"github.com/skein-dev/skein/structs"
)

// masterPortOf is the MASTER_PORT of an allocation's gang: the one the
// leader stamped, or, for an allocation committed without one, the one
// every rank derives alike.
func masterPortOf(alloc *structs.Allocation) int {
	if alloc.MasterPort != 0 {
		return alloc.MasterPort
	}
	return sched.LegacyMasterPort(alloc.JobID, alloc.Attempt)
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
