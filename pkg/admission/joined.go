package admission

import (
	"slices"

	"refuel/pkg/pool"
)

// JoinedNode is a machine that joined the base group (`worker join`).
// A draining one keeps what runs on it until that has moved, and takes
// nothing new.
type JoinedNode struct {
	pool.Node
	Draining bool `json:"draining,omitempty"`
}

// NodeState is what a joined machine's BaseNode workflow tells the pool.
type NodeState string

const (
	NodeReady    NodeState = "ready"
	NodeDraining NodeState = "draining"
	// NodeLost: silent past the heartbeat timeout. NodeLeft: it drained
	// and stopped. Either way it is no base machine any more.
	NodeLost NodeState = "lost"
	NodeLeft NodeState = "left"
)

// SetJoined records a joined machine's state and returns the allocations
// that must move off it: all of them, for a machine draining or gone,
// but those already yielding.
func (s *State) SetJoined(n pool.Node, st NodeState) []Allocation {
	i := slices.IndexFunc(s.Joined, func(j JoinedNode) bool { return j.Name == n.Name })
	switch st {
	case NodeReady, NodeDraining:
		j := JoinedNode{Node: n, Draining: st == NodeDraining}
		if i < 0 {
			s.Joined = append(s.Joined, j)
		} else {
			s.Joined[i] = j
		}
	default:
		if i >= 0 {
			s.Joined = slices.Delete(s.Joined, i, i+1)
		}
	}
	s.Nodes = s.inventory()
	s.ix = nil
	if st == NodeReady {
		return nil
	}
	return s.OnMachine(n.Name)
}

// OnMachine lists the allocations holding GPUs on a base machine, but
// those already yielding.
func (s *State) OnMachine(name string) []Allocation {
	var out []Allocation
	for _, a := range s.Running {
		if !a.Yielding && slices.Contains(a.machines(), name) {
			out = append(out, a)
		}
	}
	return out
}

// inventory is the machines placement may use: the pools file's, then
// the joined ones that are not draining. A joined machine named as one
// of the file's is the file's.
func (s *State) inventory() []pool.Node {
	nodes := s.Config.Base.Inventory()
	for _, j := range s.Joined {
		if !j.Draining && !slices.ContainsFunc(nodes, func(n pool.Node) bool { return n.Name == j.Name }) {
			nodes = append(nodes, j.Node)
		}
	}
	return nodes
}
