package activities

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"refuel/pkg/pool"
)

// Names of the activities of machines that join the base group.
const (
	// VerifyJoinName is a local activity of the BaseNode workflow, run by
	// the control plane, which alone reads the deployment's token.
	VerifyJoinName = "VerifyJoin"
	// NodePresenceName runs on a joined machine's own task queue for as
	// long as the machine is in the pool; its heartbeats are the
	// machine's.
	NodePresenceName = "NodePresence"
)

// JoinAsk is a machine's claim to join: its name, the session of its
// `worker join` process, and its proof (pool.JoinProof) of the token.
type JoinAsk struct {
	Name    string `json:"name"`
	Session string `json:"session"`
	Proof   string `json:"proof"`
}

// JoinTerms are what the deployment asks of a machine it admitted.
type JoinTerms struct {
	HeartbeatTimeout time.Duration `json:"heartbeat_timeout"`
}

// JoinRefused is the type of the error a refused join fails with.
const JoinRefused = "JoinRefused"

// Joins checks joins against the deployment's pools file and token.
// Token nil refuses every join: the pools file does not let machines
// join.
type Joins struct {
	Token            []byte
	HeartbeatTimeout time.Duration
}

// Verify admits a machine whose proof is of the deployment's token, and
// refuses any other, saying why, without a retry.
func (j *Joins) Verify(_ context.Context, ask JoinAsk) (JoinTerms, error) {
	if j == nil || j.Token == nil {
		return JoinTerms{}, temporal.NewNonRetryableApplicationError(
			"join refused: this deployment's pools file lets no machine join (set base.join: true and base.token_file)", JoinRefused, nil)
	}
	if !pool.CheckJoinProof(j.Token, ask.Name, ask.Session, ask.Proof) {
		return JoinTerms{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("join refused: machine %q did not present this deployment's token (check --token-file against the pools file's base.token_file)", ask.Name), JoinRefused, nil)
	}
	return JoinTerms{HeartbeatTimeout: j.HeartbeatTimeout}, nil
}

// PresenceInput names the session a presence belongs to.
type PresenceInput struct {
	Session string `json:"session"`
}

// Presence is a joined machine's side of its membership: NodePresence
// heartbeats until the machine leaves (Leaving closes: it drained and
// stops), or the pool cancels it (the machine joined again).
type Presence struct {
	Leaving <-chan struct{}
	session atomic.Value
}

// SetSession is the session the process joined under, the one whose
// presence it serves.
func (p *Presence) SetSession(s string) { p.session.Store(s) }

// Serve is the NodePresence activity.
func (p *Presence) Serve(ctx context.Context, in PresenceInput) error {
	if s, _ := p.session.Load().(string); in.Session != s {
		// Scheduled for this machine's previous process, which is gone.
		return temporal.NewNonRetryableApplicationError("presence of another session of the machine", "StaleSession", nil)
	}
	every := max(activity.GetInfo(ctx).HeartbeatTimeout/3, 100*time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		activity.RecordHeartbeat(ctx)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-p.Leaving:
			return nil
		case <-t.C:
		}
	}
}
