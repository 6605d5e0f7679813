package agent

import "github.com/skein-dev/skein/agent/ui"

// uiConfig is the configuration of the web UI every agent serves at /ui/
// (agent/ui): this node's state, and the telemetry of this node's GPUs
// (another node's the server asks that node for).
func (a *Agent) uiConfig() *ui.Config {
	return &ui.Config{
		FSM:       a.fsm,
		NodeID:    a.nodeID,
		NodeName:  a.cfg.Name,
		Telemetry: a.telemetry,
		Logger:    a.logger.Named("ui"),
	}
}
