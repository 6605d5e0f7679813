package agent

import (
	"time"

	"github.com/skein-dev/skein/agent/server/endpoint"
	"github.com/skein-dev/skein/agent/ui"
	"github.com/skein-dev/skein/api"
)

// uiQueueJobs bounds the queued jobs the UI orders by priority: its
// pages go that deep.
const uiQueueJobs = 10000

// uiConfig is the configuration of the web UI every agent serves at /ui/
// (agent/ui): this node's state, and the telemetry of this node's GPUs
// (another node's the server asks that node for).
func (a *Agent) uiConfig() *ui.Config {
	return &ui.Config{
		FSM:       a.fsm,
		NodeID:    a.nodeID,
		NodeName:  a.cfg.Name,
		Telemetry: a.telemetry,
		Priorities: func() *api.PrioInfo {
			return endpoint.Queue{State: a.fsm}.Priorities(time.Now().UTC(), uiQueueJobs, nil)
		},
		Logger: a.logger.Named("ui"),
	}
}
