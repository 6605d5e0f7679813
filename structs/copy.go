package structs

import (
	"maps"
	"slices"
)

// Copy returns a deep copy of the node: its labels, GPUs and their NVLink
// peers and its container engine are copied, so changing the copy never changes the original. A nil
// node copies to nil.
func (n *Node) Copy() *Node {
	if n == nil {
		return nil
	}
	c := *n
	c.Labels = maps.Clone(n.Labels)
	c.Drain = n.Drain.Copy()
	c.Partitions = slices.Clone(n.Partitions)
	if n.Containers != nil {
		e := *n.Containers
		e.Images = slices.Clone(e.Images)
		e.AllowMounts = slices.Clone(e.AllowMounts)
		e.AllowCaps = slices.Clone(e.AllowCaps)
		c.Containers = &e
	}
	if n.GPUs != nil {
		c.GPUs = make([]GPU, len(n.GPUs))
		for i, g := range n.GPUs {
			g.NVLinkPeers = slices.Clone(g.NVLinkPeers)
			c.GPUs[i] = g
		}
	}
	return &c
}

// Copy returns a deep copy of the spec: its command, environment,
// constraints, dependencies, mounts and capabilities are copied.
func (s JobSpec) Copy() JobSpec {
	s.Command = slices.Clone(s.Command)
	s.Env = maps.Clone(s.Env)
	s.SecretEnv = maps.Clone(s.SecretEnv)
	s.Constraints = maps.Clone(s.Constraints)
	s.NodeList = slices.Clone(s.NodeList)
	s.MailType = slices.Clone(s.MailType)
	s.ExcludeNodes = slices.Clone(s.ExcludeNodes)
	s.After = slices.Clone(s.After)
	s.Mounts = slices.Clone(s.Mounts)
	s.Caps = slices.Clone(s.Caps)
	if s.Array != nil {
		a := *s.Array
		s.Array = &a
	}
	if s.Signal != nil {
		sig := *s.Signal
		s.Signal = &sig
	}
	return s
}

// Copy returns a deep copy of the job, spec included. A nil job copies to nil.
func (j *Job) Copy() *Job {
	if j == nil {
		return nil
	}
	c := *j
	c.Spec = j.Spec.Copy()
	return &c
}

// Copy returns a deep copy of the allocation, GPU list, pull progress and health included. A nil
// allocation copies to nil.
func (a *Allocation) Copy() *Allocation {
	if a == nil {
		return nil
	}
	c := *a
	c.GPUs = slices.Clone(a.GPUs)
	if a.Pull != nil {
		p := *a.Pull
		c.Pull = &p
	}
	if a.Health != nil {
		h := *a.Health
		c.Health = &h
	}
	return &c
}

// Equal reports whether two engine reports say the same.
func (e *ContainerEngine) Equal(o *ContainerEngine) bool {
	if e == nil || o == nil {
		return e == o
	}
	return e.Engine == o.Engine && e.APIVersion == o.APIVersion && e.GPUs == o.GPUs && e.Error == o.Error &&
		slices.Equal(e.Images, o.Images) && slices.Equal(e.AllowMounts, o.AllowMounts) &&
		slices.Equal(e.AllowCaps, o.AllowCaps)
}

// Copy returns a deep copy of the spec: its job and health check.
func (s ServiceSpec) Copy() ServiceSpec {
	s.Job = s.Job.Copy()
	if s.Health != nil {
		h := *s.Health
		h.Command = slices.Clone(h.Command)
		s.Health = &h
	}
	return s
}

// Copy returns a deep copy of the service, its replicas' job spec, health
// check, autoscaling, rollout and previous spec included. A nil service
// copies to nil.
func (s *Service) Copy() *Service {
	if s == nil {
		return nil
	}
	c := *s
	c.Spec = s.Spec.Copy()
	if s.Autoscale != nil {
		a := *s.Autoscale
		c.Autoscale = &a
	}
	if s.Rollout != nil {
		r := *s.Rollout
		c.Rollout = &r
	}
	if s.PrevSpec != nil {
		p := s.PrevSpec.Copy()
		c.PrevSpec = &p
	}
	return &c
}
