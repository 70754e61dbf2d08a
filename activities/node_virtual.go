package activities

import "refuel/pkg/agent"

// demoFunc is the trainer function of an attempt: the node's in-process
// demo trainer for a job that names no command of its own, nil otherwise.
func (n *Node) demoFunc(in TrainingInput) agent.Func {
	if len(in.Spec.Command) > 0 {
		return nil
	}
	return n.DemoTrainer
}
