package structs

import "fmt"

// DefaultMasterPorts is the range a gang's MASTER_PORT comes from on a node
// that registered none: torchrun's default port and the 499 above it.
var DefaultMasterPorts = PortRange{Min: 29500, Max: 29999}

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

// MasterPortRange is the range the node registered, else DefaultMasterPorts.
func (n *Node) MasterPortRange() PortRange {
	if n.MasterPorts == (PortRange{}) {
		return DefaultMasterPorts
	}
	return n.MasterPorts
}
