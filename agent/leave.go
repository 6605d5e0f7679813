package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

// departRetry is the pause before a leaving node asks the leader again.
const departRetry = 200 * time.Millisecond

// Leave stops local jobs, leaves the cluster gracefully and closes Done.
// The node starts nothing new meanwhile. A leader first hands leadership
// over; then the node tells the others by gossip that it leaves rather
// than fails; then it asks the leader to take it out of Raft (a server)
// and mark it left, and waits for that to be committed. LeaveErr says
// whether it was clean.
func (a *Agent) Leave() {
	a.leaving.Do(func() {
		defer close(a.done)
		a.logger.Info("leaving the cluster")
		a.node.StopStarting()
		a.node.StopAll("node leaving the cluster")
		a.node.FlushReports(reportFlush)
		ctx, cancel := context.WithTimeout(a.ctx, leaveTimeout)
		defer cancel()
		if err := a.leave(ctx); err != nil {
			a.leaveErr.Store(&err)
			a.logger.Warn("leave was not clean", "error", err)
			return
		}
		a.logger.Info("left the cluster")
	})
}

// LeaveErr is why the agent's leave was not clean, or nil.
func (a *Agent) LeaveErr() error {
	if p := a.leaveErr.Load(); p != nil {
		return *p
	}
	return nil
}

// leave carries out the leave's steps in the cluster.
func (a *Agent) leave(ctx context.Context) error {
	if a.node.Alone() && a.peers.Alone() {
		return nil // a cluster of one: nobody to tell
	}
	if err := a.raft.HandOver(); err != nil {
		return err
	}
	// Gossip first: a member the others know as left is not added back
	// to Raft, as one still alive in gossip would be once the leader has
	// taken it out.
	deadline, _ := ctx.Deadline()
	if err := a.raft.AnnounceLeave(time.Until(deadline)); err != nil {
		return err
	}
	for {
		err := a.depart(ctx)
		if err == nil {
			break
		}
		a.logger.Debug("the leader has not taken this node out yet; asking again", "error", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("leave: the leader did not take this node out of the cluster: %w", err)
		case <-time.After(departRetry):
		}
	}
	return nil
}

// depart asks the leader to take this node out of the cluster, or does
// it itself should it lead again (a hand-over that did not hold).
func (a *Agent) depart(ctx context.Context) error {
	c, err := a.peers.LeaderClient(ctx)
	switch {
	case err != nil:
		return err
	case c == nil:
		if err := a.raft.HandOver(); err != nil {
			return err
		}
		return errors.New("this node led again; handed over once more")
	}
	err = c.Depart(ctx, a.nodeID)
	var remote *api.Error
	if errors.As(err, &remote) && remote.StatusCode == http.StatusNotFound && strings.Contains(remote.Message, "no such endpoint") {
		// A leader of the release before: it knows no depart, and takes
		// the node out on its gossip leave instead.
		a.logger.Info("the leader runs a release that knows no depart; it takes this node out on its gossip leave")
		return nil
	}
	return err
}

// departNode takes a leaving node out of Raft, where it is a server, then
// marks it left, so that it never shows down. This node must lead; the
// promoter then gives a standby the vote the node had.
func (a *Agent) departNode(id string) error {
	if id == a.nodeID {
		return fmt.Errorf("%w: the leader cannot take itself out: it hands over first", errLeaderDeparts)
	}
	servers, err := a.raft.Servers()
	if err != nil {
		return err
	}
	for _, s := range servers {
		if s.ID == id {
			if err := a.raft.RemoveServer(id); err != nil {
				return err
			}
			break
		}
	}
	n, ok := a.fsm.Node(id)
	if !ok || n.Status == structs.NodeLeft {
		return nil
	}
	_, err = a.apply(structs.NodeStatusType, structs.NodeStatusRequest{NodeID: id, Status: structs.NodeLeft, Reason: "left the cluster", At: time.Now().UTC()})
	return err
}

// errLeaderDeparts refuses a leader's request to take itself out.
var errLeaderDeparts = errors.New("leave")
