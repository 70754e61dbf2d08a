package capacitypool

import "refuel/pkg/admission"

// PoolStatus is the pool's answer to the status query.
type Status struct {
	Waiting []QueuedRequest        `json:"waiting"`
	Running []admission.Allocation `json:"running"`
	// Base and Burst count the instances held on each layer (every node
	// of a gang); FreeBaseGPUs is what the base group has left.
	Base         int   `json:"base"`
	Burst        int   `json:"burst"`
	BaseGPUs     int   `json:"base_gpus"`
	FreeBaseGPUs int   `json:"free_base_gpus"`
	Preemptions  int   `json:"preemptions"`
	Moves        int   `json:"moves"`
	Generation   int   `json:"generation"`
	History      int64 `json:"history_events"`
	// Delivering counts grants and yields sent to holders and not yet
	// delivered; Unsent those decided and waiting for the send window.
	Delivering int `json:"delivering"`
	Unsent     int `json:"unsent"`
}

// QueuedRequest is a waiting request with the priority it ranks at now.
type QueuedRequest struct {
	admission.Request
	EffectivePriority float64 `json:"effective_priority"`
	// Why says why it waits: paused, fits nowhere its tier may use,
	// behind the head of the queue, or, at the head, for what.
	Why string `json:"why,omitempty"`
}
