package trainer

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"
)

// The trainer contract's variables for a gang of several nodes training
// one job together (pkg/agent's documentation).
const (
	NodeRankEnv   = "REFUEL_NODE_RANK"
	NumNodesEnv   = "REFUEL_NUM_NODES"
	MasterAddrEnv = "REFUEL_MASTER_ADDR"
	MasterPortEnv = "REFUEL_MASTER_PORT"
)

// Defaults of the gang's timeouts (flags --join-timeout, --peer-timeout).
const (
	// DefaultJoinTimeout is how long rank 0 waits for every other rank to
	// join, and they for rank 0 to answer: the ranks' agents start their
	// trainers at slightly different times, each after restoring a
	// checkpoint.
	DefaultJoinTimeout = 2 * time.Minute
	// DefaultPeerTimeout is how long one exchange of a step may take
	// before the rank on the other end is taken for gone: a machine that
	// loses its power closes no connection.
	DefaultPeerTimeout = time.Minute
)

// stopWait bounds the wait for another rank once this one is asked to
// stop: the notice's window is better spent writing the checkpoint of the
// last step done than waiting for a rank that may be gone.
const stopWait = 10 * time.Second

// gang is this trainer's place among the nodes training together; Nodes 1
// trains alone.
type gang struct {
	Rank, Nodes int
	// Master is rank 0's host:port, where it listens for the others.
	Master string
	// Job and Attempt, from the contract's REFUEL_JOB_ID and
	// REFUEL_ATTEMPT, tell one gang's ranks from another's that reached
	// the same port.
	Job, Attempt string
}

func (g gang) together() bool { return g.Nodes > 1 }

// gangFromEnv reads the trainer's place in its gang from the contract's
// variables. Without REFUEL_NUM_NODES, or with it 1, the trainer trains
// alone and the others are not read. A bad value is an error naming the
// variable.
func gangFromEnv(getenv func(string) string) (gang, error) {
	g := gang{Rank: 0, Nodes: 1, Job: getenv("REFUEL_JOB_ID"), Attempt: getenv("REFUEL_ATTEMPT")}
	if v := getenv(NumNodesEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return gang{}, fmt.Errorf("%s=%q: want the number of nodes, 1 or more", NumNodesEnv, v)
		}
		g.Nodes = n
	}
	if !g.together() {
		return g, nil
	}
	var errs []error
	rank, err := strconv.Atoi(getenv(NodeRankEnv))
	if err != nil || rank < 0 || rank >= g.Nodes {
		errs = append(errs, fmt.Errorf("%s=%q: want this node's rank, 0 to %d", NodeRankEnv, getenv(NodeRankEnv), g.Nodes-1))
	}
	addr := getenv(MasterAddrEnv)
	if addr == "" {
		errs = append(errs, fmt.Errorf("%s is not set: want rank 0's address", MasterAddrEnv))
	}
	port, err := strconv.Atoi(getenv(MasterPortEnv))
	if err != nil || port < 1 || port > 65535 {
		errs = append(errs, fmt.Errorf("%s=%q: want the port rank 0 listens on, 1 to 65535", MasterPortEnv, getenv(MasterPortEnv)))
	}
	if err := errors.Join(errs...); err != nil {
		return gang{}, err
	}
	g.Rank, g.Master = rank, net.JoinHostPort(addr, strconv.Itoa(port))
	return g, nil
}
