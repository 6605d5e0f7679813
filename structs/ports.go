package structs

import (
	"fmt"
	"strconv"
	"strings"
)

// DefaultMasterPorts is the range a gang's MASTER_PORT comes from on a node
// that registered none: torchrun's default port and the 499 above it.
var DefaultMasterPorts = PortRange{Min: 29500, Max: 29999}

// ParsePortRange reads the MIN-MAX form of a port range ("29500-29999");
// Validate checks the bounds.
func ParsePortRange(s string) (PortRange, error) {
	lo, hi, ok := strings.Cut(s, "-")
	var r PortRange
	var err1, err2 error
	r.Min, err1 = strconv.Atoi(lo)
	r.Max, err2 = strconv.Atoi(hi)
	if !ok || err1 != nil || err2 != nil {
		return PortRange{}, fmt.Errorf("invalid port range %q: want MIN-MAX, like 29500-29999", s)
	}
	return r, nil
}

// Contains reports whether port is in the range.
func (r PortRange) Contains(port int) bool { return port >= r.Min && port <= r.Max }

// Len is the number of ports in the range.
func (r PortRange) Len() int { return r.Max - r.Min + 1 }

func (r PortRange) String() string { return fmt.Sprintf("%d-%d", r.Min, r.Max) }

// Validate checks an unprivileged, non-empty range.
func (r PortRange) Validate() error {
	if r.Min < 1024 || r.Max > 65535 || r.Min > r.Max {
		return fmt.Errorf("port range %s: want MIN-MAX with 1024 <= MIN <= MAX <= 65535", r)
	}
	return nil
}

// NeedsMasterPort reports whether the leader gives the job's allocations a
// port (Allocation.MasterPort): a gang of several nodes, whose ranks meet
// at rank 0's, and a service's replica, which the ingress reaches on it.
// Any other job takes a port its node finds free as it starts.
func (j *Job) NeedsMasterPort() bool { return j.Spec.Nodes > 1 || j.Service != "" }

// MasterPortRange is the range the node registered, else DefaultMasterPorts.
func (n *Node) MasterPortRange() PortRange {
	if n.MasterPorts == (PortRange{}) {
		return DefaultMasterPorts
	}
	return n.MasterPorts
}
