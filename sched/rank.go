package sched

// rankZeroFirst orders a gang's chosen nodes for ranks: rank 0 on the node
// with the fastest network link (Node.LinkMbps), because rank 0 hosts the
// rendezvous (MASTER_ADDR) and, in most frameworks, broadcasts the initial
// weights and gathers checkpoints, so its link carries the most traffic.
// Ties, unknown speeds (0) included, keep the score order, so a cluster
// that reports no speeds places exactly as before. The other ranks keep
// their score order. fits is reordered in place and returned.
func rankZeroFirst(l *ledger, fits []fit) []fit {
	best := 0
	for i := 1; i < len(fits); i++ {
		if l.nodes[fits[i].node].node.LinkMbps > l.nodes[fits[best].node].node.LinkMbps {
			best = i
		}
	}
	if best > 0 {
		f := fits[best]
		copy(fits[1:best+1], fits[:best])
		fits[0] = f
	}
	return fits
}
