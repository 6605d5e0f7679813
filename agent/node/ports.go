package node

import (
	"fmt"
	"net"
	"strconv"

	"github.com/skein-dev/skein/sched"
	"github.com/skein-dev/skein/structs"
)

// masterPortOf is the MASTER_PORT of an allocation's gang or replica: the
// one the leader stamped, or, for one committed without one (by a leader
// from before ports were stamped), the one every rank derives alike; 0
// for another job's allocation, which was given none (its node picks one).
func masterPortOf(alloc *structs.Allocation, job *structs.Job) int {
	switch {
	case alloc.MasterPort != 0:
		return alloc.MasterPort
	case job.NeedsMasterPort():
		return sched.LegacyMasterPort(alloc.JobID, alloc.Attempt)
	}
	return 0
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

// freeLocalPort is a port free on every address of this node now, as the
// kernel picks one, for a job of one node that was given none.
func freeLocalPort() (int, error) {
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		return 0, fmt.Errorf("find a free port for MASTER_PORT: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// rankZeroRuns reports whether rank 0 of alloc's attempt has left
// pending, as this node's view has it: until then its port may still
// move. A rank 0 that ran and ended counts (it may have succeeded before
// this node looked); one that failed has the gang stopped anyway.
func (n *Node) rankZeroRuns(alloc *structs.Allocation) bool {
	for _, o := range n.view.Allocs(alloc.JobID) {
		if o.Attempt == alloc.Attempt && o.Rank == 0 {
			return o.State != structs.AllocPending
		}
	}
	return false
}
