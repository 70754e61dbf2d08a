package inference

import (
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/workflow"

	"refuel/pkg/admission"
	"refuel/pkg/autoscale"
	"refuel/pkg/cost"
	"refuel/pkg/serving"
	"refuel/workflows"
	"refuel/workflows/workload"
)

// ServiceStatus is an InferenceService's answer to the "status" query
// (docs/contracts.md); fields are only ever added.
type Status struct {
	ID          string          `json:"id"`
	Team        string          `json:"team"`
	Tier        string          `json:"tier"`
	Priority    int             `json:"priority"`
	State       workflows.State `json:"state"`
	MinReplicas int             `json:"min_replicas"`
	MaxReplicas int             `json:"max_replicas"`
	// Desired is the latest decision: replicas, warm instances, and why.
	Desired  autoscale.Decision `json:"desired"`
	Ready    int                `json:"ready"`
	Starting int                `json:"starting"`
	// Warm counts prepared instances, ready to join, running or stopped;
	// warm-pool entries still being acquired are listed in Replicas but
	// not counted here.
	Warm        int                `json:"warm"`
	Replicas    []ReplicaStatus    `json:"replicas"`
	LastMetrics *autoscale.Metrics `json:"last_metrics"`
	// LeadTimeSeconds is how far ahead the autoscaler plans: learned from
	// measured start-ups unless the spec fixes it.
	LeadTimeSeconds float64 `json:"lead_time_seconds"`
	CostUSD         float64 `json:"cost_usd"`
	// Ledger is the replica instance time behind cost_usd since the last
	// continue-as-new; what came before is folded into cost_usd.
	Ledger    cost.Ledger        `json:"ledger"`
	Failures  []workload.Failure `json:"failures"`
	Decisions []DecisionRecord   `json:"decisions"`
	// AcquiringHeldUntil is set while acquisitions back off after failures
	// that retrying at once cannot cure (quota, spec mismatch, price).
	AcquiringHeldUntil *time.Time `json:"acquiring_held_until,omitempty"`
	StartedAt          time.Time  `json:"started_at"`
	// StoppedAt is when a stopped service was stopped (state stopped).
	StoppedAt *time.Time `json:"stopped_at,omitempty"`
	// ReplicasLost counts replicas whose instance the cloud took back
	// (spot stock running out); each was replaced.
	ReplicasLost int `json:"replicas_lost"`
	// Market says why the fleet is what it is, as a run's status.market
	// does: the autoscaler's latest decision in a line a person reads.
	Market *ServiceMarket `json:"market,omitempty"`
	// Placement is the spec's placement (spot-first, on-demand); Tier is
	// the job tier whose markets match it, for the RefuelTier filter.
	Placement string `json:"placement,omitempty"`
	// StockOuts counts the failures of class no-capacity, every one.
	StockOuts *workload.StockOuts `json:"stock_outs,omitempty"`

	// Mode is "serving" for a service whose replicas run its command,
	// "capacity-only" for one without a command.
	Mode string `json:"mode"`
	// Endpoint is host:port of its balancer (the latest traffic report's),
	// where clients send requests; "" until a balancer reported.
	Endpoint string `json:"endpoint,omitempty"`
	// Serving is what a balancer enforces; null for a capacity-only
	// service, which no balancer fronts.
	Serving *serving.Settings `json:"serving"`
	// Traffic is what its balancers measured in their latest windows.
	Traffic *serving.Traffic `json:"traffic,omitempty"`
	// ReplicaFailures counts model servers that failed and were restarted
	// or replaced; failures lists their last lines.
	ReplicaFailures int `json:"replica_failures,omitempty"`
}

// Modes of a service (Status.Mode).
const (
	ModeServing      = "serving"
	ModeCapacityOnly = "capacity-only"
)

// ServiceMarket is a service's latest scaling decision, explained.
type ServiceMarket struct {
	Why       string    `json:"why"`
	DecidedAt time.Time `json:"decided_at"`
}

// ReplicaState is where a replica, or a warm-pool instance, is.
type ReplicaState string

const (
	// ReplicaStarting: requested and not serving yet: queued with the
	// pool, being acquired, or loading its model.
	ReplicaStarting ReplicaState = "starting"
	ReplicaReady    ReplicaState = "ready"
	// ReplicaWarm: a warm-pool instance, being acquired or prepared, and
	// running.
	ReplicaWarm ReplicaState = "warm"
	// ReplicaStopped: a warm-pool instance stopped, its volume (and the
	// model on it) kept, paid at stopped_price_per_hour until scale-out
	// starts it.
	ReplicaStopped   ReplicaState = "stopped"
	ReplicaReleasing ReplicaState = "releasing"
	// ReplicaDraining: a model server taking no new requests, finishing
	// those it holds (scale-in, or an interruption notice).
	ReplicaDraining ReplicaState = serving.ReplicaDraining
)

// ReplicaStatus is one replica as status shows it.
type ReplicaStatus struct {
	ID    string          `json:"id"`
	State ReplicaState    `json:"state"`
	Layer admission.Layer `json:"layer,omitempty"` // once placed: base or burst
	// Instance is null until one is acquired.
	Instance    *workload.InstanceRef `json:"instance"`
	RequestedAt time.Time             `json:"requested_at"`
	ReadyAt     *time.Time            `json:"ready_at"`
	// Endpoint is host:port of its model server, for a balancer: set
	// while it is ready or draining.
	Endpoint string `json:"endpoint,omitempty"`
	// StoppedPricePerHour is what a stopped warm-pool instance costs an
	// hour (its volume); set while its state is stopped.
	StoppedPricePerHour float64 `json:"stopped_price_per_hour,omitempty"`
}

// DecisionRecord is one change in what the autoscaler wanted.
type DecisionRecord struct {
	Time     time.Time `json:"time"`
	Replicas int       `json:"replicas"`
	Warm     int       `json:"warm"`
	Reason   string    `json:"reason"`
	// Explanation is the decision in a line a person reads.
	Explanation string `json:"explanation,omitempty"`
}

// maxDecisions bounds how many decisions status keeps (the newest).
const maxDecisions = 20

func (r *Replica) Status() ReplicaStatus {
	rs := ReplicaStatus{ID: r.ID, State: r.State, Layer: r.Layer, RequestedAt: r.RequestedAt}
	if r.Lease != nil {
		rs.Instance = r.Ref()
	}
	if r.RunsOn != nil {
		rs.Instance = r.RunsOn
	}
	if r.State == ReplicaReady || r.State == ReplicaDraining {
		rs.Endpoint = r.Endpoint
	}
	if r.Stopped && r.State == ReplicaWarm {
		rs.State, rs.StoppedPricePerHour = ReplicaStopped, r.StoppedPricePerHour
	}
	if !r.ReadyAt.IsZero() {
		at := r.ReadyAt
		rs.ReadyAt = &at
	}
	return rs
}

// fleet is the replicas as the autoscaler counts them: warm counts only

// ShowDetails keeps what the Web UI shows as the service's current
// details up to date: its fleet, the latest decision and its cost.
func (s *service) ShowDetails(ctx workflow.Context) {
	now := workflow.Now(ctx)
	f := s.fleet()
	head := "**" + string(s.state) + "** · " + strconv.Itoa(f.Ready) + " ready, " + strconv.Itoa(f.Starting) + " starting, " +
		strconv.Itoa(f.Warm) + " warm · " + workload.Dollars(s.EarlierCostUSD+s.Ledger.CostUSD(now)) + " spent"
	if s.ServesReplicas {
		ep := "no balancer has reported yet"
		if e := s.balancers().endpoint(); e != "" {
			ep = "endpoint **" + e + "**"
		}
		head += " · " + ep
		if t := s.balancers().traffic(); t != nil {
			head += " · " + strconv.FormatFloat(t.RPS, 'f', 1, 64) + " req/s, p99 " + strconv.FormatFloat(t.LatencyP99Seconds*1000, 'f', 0, 64) +
				" ms, " + strconv.FormatFloat(t.SLOShare*100, 'f', 1, 64) + "% within the SLO"
		}
	} else {
		head += " · capacity-only (no command)"
	}
	lines := []string{head,
		"team " + s.spec.Team + " · placement " + string(s.spec.Placement) + " · priority " + strconv.Itoa(s.spec.Priority) +
			" · " + strconv.Itoa(s.spec.MinReplicas) + ".." + strconv.Itoa(s.spec.MaxReplicas) + " replicas"}
	if d := s.Desired; d.Reason != "" {
		lines = append(lines, "wants "+strconv.Itoa(d.Replicas)+" replicas and "+strconv.Itoa(d.Warm)+" warm: "+d.Reason)
	}
	if why := s.Desired.Explanation; why != "" {
		lines = append(lines, "market: "+why)
	}
	if f := s.Desired.Forecast; f != nil {
		lines = append(lines, forecastLine(f))
	}
	for _, r := range s.Replicas {
		line := r.ID + ": " + string(r.Status().State)
		switch on := r.RunsOn; {
		case r.Lease != nil:
			line += " on " + workload.OfferingPlace(r.Offering()) + " (" + r.Instance.ID + ", " + string(r.Layer) + ")"
		case on != nil: // a serving replica: its ServiceReplica child holds the lease
			line += " on " + on.Offering + " (" + on.ID + ")"
		}
		if r.Endpoint != "" && (r.State == ReplicaReady || r.State == ReplicaDraining) {
			line += " at " + r.Endpoint
		}
		lines = append(lines, line)
	}
	fs, so := workload.FoldStockOuts(s.Failures, s.StockOuts)
	if so != nil {
		lines = append(lines, so.Line(" UTC"))
	}
	if n := len(fs); n > 0 {
		f := fs[n-1]
		lines = append(lines, "last failure: "+f.Class+" on "+f.Offering+": "+f.Message)
	}
	workflow.SetCurrentDetails(ctx, strings.Join(lines, "  \n"))
}

// forecastLine is the forecast against the load it expected and got:
// "forecast: peak-1L expects 7.4 replicas at 12:05:10 UTC (margin 0.5);
// for 12:00:10 it expected 6.9, and 7.2 came".
func forecastLine(f *autoscale.Forecast) string {
	line := "forecast: " + f.Forecaster + " expects " + replicaCount(f.Load) + " replicas at " + f.At.UTC().Format(time.TimeOnly) +
		" UTC (margin " + replicaCount(f.Margin) + ")"
	if f.Expected != nil {
		line += "; for " + f.NowAt.UTC().Format(time.TimeOnly) + " it expected " + replicaCount(*f.Expected) + ", and " + replicaCount(f.Now) + " came"
	}
	return line
}

func replicaCount(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
