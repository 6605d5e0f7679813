package node

import (
	"slices"
	"time"

	"github.com/skein-dev/skein/structs"
)

// EngineProbeInterval is how often the node asks its container engine
// what it is.
const EngineProbeInterval = time.Minute

// engineLoop probes the container engine at start and then every
// EngineProbeInterval, and registers the node again when the answer
// differs from the one last registered. Each probe is bounded by the
// prober's own timeout, so a silent engine delays nothing else.
func (n *Node) engineLoop() {
	t := time.NewTicker(EngineProbeInterval)
	defer t.Stop()
	for {
		got := n.cfg.Engine.Probe(n.ctx)
		if got.Error == "" {
			got.AllowMounts = slices.Clone(n.cfg.AllowMounts)
			got.AllowCaps = slices.Clone(n.cfg.AllowCaps)
		}
		n.mu.Lock()
		n.engine = &got
		n.mu.Unlock()
		select {
		case <-n.ctx.Done():
			return
		case <-n.registered:
		}
		if n.engineChanged() {
			if got.Error != "" {
				n.log.Warn("container engine does not answer", "error", got.Error)
			} else {
				n.log.Info("container engine answers", "engine", got.Engine, "api", got.APIVersion, "gpus", got.GPUs)
			}
			if err := n.register(); err != nil {
				n.log.Warn("cannot register the container engine's new state; retrying at the next probe", "error", err)
			}
		}
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// engineReport returns the engine's last probe, nil when none is probed
// or none has answered yet.
func (n *Node) engineReport() *structs.ContainerEngine {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.engine == nil {
		return nil
	}
	e := *n.engine
	e.Images = slices.Clone(e.Images)
	e.AllowMounts = slices.Clone(e.AllowMounts)
	e.AllowCaps = slices.Clone(e.AllowCaps)
	return &e
}

// engineChanged is true when the last probe differs from the report the
// node last registered.
func (n *Node) engineChanged() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case n.engine == nil:
		return false
	case n.engineRegistered == nil:
		return true
	}
	return !n.engine.Equal(n.engineRegistered)
}
