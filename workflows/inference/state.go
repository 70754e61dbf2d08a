package inference

import (
	"encoding/json"
	"time"

	"refuel/activities"
	"refuel/pkg/admission"
	"refuel/pkg/autoscale"
	"refuel/pkg/capacity"
	"refuel/pkg/serving"
	"refuel/workflows/workload"
)

// ServiceState is an InferenceService's whole state: what its steps
// read and write, and what it hands on, as it is, when it continues as
// new. What is under way when it does (calls, releases) is waited for
// first, so nothing else needs handing on.
type ServiceState struct {
	// Options are what the service started under, recorded in its
	// history; nil for a service recorded before they were.
	Options *Options `json:"options,omitempty"`
	// Autoscaler is the policy of services started before the
	// ForecastScaler; ForecastScaler, when set, is the policy followed.
	Autoscaler     autoscale.Autoscaler      `json:"autoscaler"`
	ForecastScaler *autoscale.ForecastScaler `json:"forecast_scaler,omitempty"`
	// Replicas are the replicas and warm-pool instances, in request order.
	Replicas []*Replica `json:"replicas"`
	// Leases number the service's acquisitions and book its replicas'
	// instance time.
	workload.Leases
	// EarlierCostUSD is what instances given back in earlier runs cost:
	// their ledger segments are folded into it, so the carry stays small
	// however long the service runs.
	EarlierCostUSD float64 `json:"earlier_cost_usd"`
	// NextReplica numbers replica ids, never reused.
	NextReplica int `json:"next_replica"`
	// Offerings are the public offerings, listed once, the first time a
	// replica is placed without a pool.
	Offerings []capacity.Offering `json:"offerings,omitempty"`
	// HoldUntil stops acquisitions until then after a failure; Backoff is
	// the latest hold after a failure that waiting does not cure.
	HoldUntil time.Time          `json:"hold_until,omitzero"`
	Backoff   time.Duration      `json:"backoff,omitempty"`
	Desired   autoscale.Decision `json:"desired"`
	// DecidedAt is when the autoscaler last decided (status.market).
	DecidedAt   time.Time           `json:"decided_at,omitzero"`
	LastMetrics *autoscale.Metrics  `json:"last_metrics,omitempty"`
	Decisions   []DecisionRecord    `json:"decisions"`
	Failures    []workload.Failure  `json:"failures"`
	StockOuts   *workload.StockOuts `json:"stock_outs,omitempty"`
	StartedAt   time.Time           `json:"started_at"`
	// ReplicasLost counts replicas whose instance the cloud took back.
	ReplicasLost int `json:"replicas_lost,omitempty"`
	// ServesReplicas is set for a service with a command: each replica
	// is a ServiceReplica child workflow running the model server.
	ServesReplicas bool `json:"serves_replicas,omitempty"`
	// Traffic are the latest reports of its balancers (serving.Keep).
	Traffic []serving.Report `json:"traffic,omitempty"`
	// ReplicaFailures counts model servers that failed (exited, or were
	// never ready) and were restarted or replaced.
	ReplicaFailures int `json:"replica_failures,omitempty"`
}

// ServiceReplica is one replica, or one warm-pool instance, of a service.
type Replica struct {
	ID    string       `json:"id"`
	State ReplicaState `json:"state"`
	// Placer is who finds its capacity; empty until the pool was asked.
	Placer Placer                `json:"placer,omitempty"`
	Grant  *admission.Allocation `json:"grant,omitempty"`
	Layer  admission.Layer       `json:"layer,omitempty"`
	// Lease is the replica's instance, once it has one.
	*workload.Lease

	RequestedAt  time.Time `json:"requested_at"`
	LoadingSince time.Time `json:"loading_since,omitzero"`
	ReadyAt      time.Time `json:"ready_at,omitzero"`
	// FromWarm is set for a replica taken from the warm pool already
	// prepared: only its model load remained.
	FromWarm bool `json:"from_warm,omitempty"`
	// Stopped is set while a warm-pool entry's instance is stopped, its
	// volume (and the model on it) kept, costing StoppedPricePerHour.
	Stopped             bool    `json:"stopped,omitempty"`
	StoppedPricePerHour float64 `json:"stopped_price_per_hour,omitempty"`
	// StartedIn is how long starting its stopped instance took, part of
	// its warm start-up.
	StartedIn     time.Duration            `json:"started_in,omitempty"`
	ReleaseReason activities.ReleaseReason `json:"release_reason,omitempty"`

	// A ServiceReplica's, as it last reported: Endpoint is its model
	// server's host:port while it runs, RunsOn its instance, CostUSD what
	// its instances cost. Retiring is set once it was asked to drain for
	// good (scale-in).
	Endpoint string                `json:"endpoint,omitempty"`
	RunsOn   *workload.InstanceRef `json:"runs_on,omitempty"`
	CostUSD  float64               `json:"cost_usd,omitempty"`
	Retiring bool                  `json:"retiring,omitempty"`

	// busy is set while a call made for the replica (asking the pool,
	// listing offerings, acquiring, binding) is under way. A release
	// waits for it, so what the call obtains is given back too. It is
	// never carried: continue-as-new waits until no call is under way.
	busy bool
	// stopping is set while its warm-pool instance is being stopped: a
	// promotion waits for the stop, then starts it. Never carried, as
	// busy.
	stopping bool
}

// Placer is who finds a replica its capacity.
type Placer string

const (
	// PlacedByPool replicas are granted by the capacity pool, which must
	// hear when they are given back.
	PlacedByPool Placer = "pool"
	// PlacedBySelf replicas were requested while no pool ran: the service
	// acquires them on the public offerings itself.
	PlacedBySelf Placer = "self"
)

// UnmarshalJSON reads a state, including one handed on by a run of the
// workflow that numbered its acquisitions as next_attempt.
func (s *ServiceState) UnmarshalJSON(data []byte) error {
	type plain ServiceState
	if err := json.Unmarshal(data, (*plain)(s)); err != nil {
		return err
	}
	var old struct {
		NextAttempt int `json:"next_attempt"`
	}
	if err := json.Unmarshal(data, &old); err != nil {
		return err
	}
	if s.Attempts == 0 {
		s.Attempts = old.NextAttempt
	}
	return nil
}
