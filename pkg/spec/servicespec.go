package spec

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Placement says where a service's replicas may run once the dedicated
// base group is full.
type Placement string

const (
	// PlacementSpotFirst overflows to spot and falls back to on-demand
	// when no spot offering can be had.
	PlacementSpotFirst Placement = "spot-first"
	// PlacementOnDemand overflows to on-demand only.
	PlacementOnDemand Placement = "on-demand"
)

// Tier returns the job tier whose markets match the placement, so
// services and training runs share one offering order.
func (p Placement) Tier() Tier {
	if p == PlacementOnDemand {
		return TierCritical
	}
	return TierDeadline
}

// Defaults applied by ServiceSpec.Normalize to fields left out.
const (
	DefaultTolerance      = 0.1
	DefaultDownscaleDelay = 10 * time.Minute
	DefaultLeadTime       = "auto"
	DefaultPlacement      = PlacementSpotFirst

	// Serving defaults, for a service with a command.
	DefaultReadinessPath    = "/healthz"
	DefaultInitialDelay     = 10 * time.Minute
	DefaultReadinessPeriod  = 2 * time.Second
	DefaultReadinessTimeout = time.Second
	DefaultMaxConcurrency   = 16
	DefaultQueueTimeout     = 30 * time.Second
	DefaultDrainTimeout     = 30 * time.Second
	DefaultSLOLatency       = time.Second
)

// Limits of a ServiceSpec's serving fields (README, serving section).
const (
	MaxReadinessPathBytes = 256
	MinReadinessPeriod    = 100 * time.Millisecond
	MaxReadinessPeriod    = 10 * time.Minute
	MaxInitialDelay       = 2 * time.Hour
	MaxQueueTimeout       = time.Hour
	MaxDrainTimeout       = time.Hour
	MaxSLOLatency         = time.Hour
	MaxConcurrency        = 100000
)

// ServiceSpec is one inference service, the InferenceService workflow's
// input (docs/contracts.md).
type ServiceSpec struct {
	ID          string `json:"id"`
	Team        string `json:"team,omitempty"`
	Priority    int    `json:"priority"`
	MinReplicas int    `json:"min_replicas"`
	MaxReplicas int    `json:"max_replicas"`
	// Target is the load one replica should carry; with several targets
	// the one asking for most replicas wins.
	Target ScalingTarget `json:"target"`
	// Tolerance is the fall in load, as a share of the replicas, ignored
	// as noise (0.1: 10%); 0 means DefaultTolerance. Rises are never
	// ignored: too few replicas breaks the SLO at once.
	Tolerance float64 `json:"tolerance,omitempty"`
	// UpscaleDelay is how long more replicas must be wanted before they
	// are requested; 0 requests at once.
	UpscaleDelay Duration `json:"upscale_delay,omitempty"`
	// DownscaleDelay is how long fewer replicas must be wanted before any
	// is released; 0 means DefaultDownscaleDelay.
	DownscaleDelay Duration `json:"downscale_delay,omitempty"`
	// Schedules are windows with a replica floor, for load known in advance.
	Schedules []ScalingWindow `json:"schedules,omitempty"`
	// LeadTime is how far ahead to scale: "auto" learns it from measured
	// provision, initialisation and model-load times; a duration fixes it.
	LeadTime string `json:"lead_time,omitempty"`
	// WarmPool is how many prepared instances to keep ready to join.
	WarmPool int `json:"warm_pool,omitempty"`
	// ModelLoad is how long a replica takes from its instance running to
	// serving (starting the server, loading the model). The workflow
	// waits this long for each replica, and learns the lead time from it
	// plus the provision time it measures.
	ModelLoad Duration  `json:"model_load,omitempty"`
	Placement Placement `json:"placement,omitempty"`
	Resources Resources `json:"resources"`

	// Command is the model server each replica runs, listening on
	// $REFUEL_PORT; without it the service is capacity-only: its
	// replicas hold instances and run nothing (see Serves).
	Command []string `json:"command,omitempty"`
	// Env is added to the command's environment, beside the contract's
	// REFUEL_* variables (which it may not override).
	Env map[string]string `json:"env,omitempty"`
	// Workdir is where the command runs, as a JobSpec's.
	Workdir string `json:"workdir,omitempty"`
	// Readiness says when a replica's server takes requests; Normalize
	// fills it for a service with a command.
	Readiness *Readiness `json:"readiness,omitempty"`
	// MaxConcurrency is the requests one replica takes at once; more
	// wait at the balancer. 0 means DefaultMaxConcurrency.
	MaxConcurrency int `json:"max_concurrency,omitempty"`
	// QueueTimeout is how long a request waits at the balancer for a
	// replica before it is answered 503 with Retry-After.
	QueueTimeout Duration `json:"queue_timeout,omitempty"`
	// DrainTimeout is how long a replica being scaled in finishes what it
	// holds, taking nothing new, before it is stopped and released.
	DrainTimeout Duration `json:"drain_timeout,omitempty"`
	SLO          *SLO     `json:"slo,omitempty"`
}

// Readiness is a replica's readiness probe: an HTTP GET of Path on its
// server every Period, each given Timeout, from InitialDelay after the
// server starts (probes before it may already succeed; a failure only
// counts after it). The replica is ready at the first 2xx. One not ready
// by ReadyBy is replaced.
type Readiness struct {
	Path         string   `json:"path,omitempty"`
	InitialDelay Duration `json:"initial_delay,omitempty"`
	Period       Duration `json:"period,omitempty"`
	Timeout      Duration `json:"timeout,omitempty"`
}

// SLO is what a service promises its callers: Latency is the time within
// which a request counts as answered well.
type SLO struct {
	Latency Duration `json:"latency,omitempty"`
}

// Serves reports whether the service runs a model server on each replica
// (command set); one that does not is capacity-only.
func (s ServiceSpec) Serves() bool { return len(s.Command) > 0 }

// ScalingTarget is the load one replica should carry. Zero fields are not
// targeted; at least one must be set.
type ScalingTarget struct {
	QPS            float64 `json:"qps,omitempty"`             // requests per second per replica
	QueueLength    float64 `json:"queue_length,omitempty"`    // waiting requests per replica
	Concurrency    float64 `json:"concurrency,omitempty"`     // requests in flight per replica
	GPUUtilization float64 `json:"gpu_utilization,omitempty"` // busy share of a replica's GPUs, in (0, 1]
}

// ScalingWindow keeps at least MinReplicas from each time Cron fires for
// Duration.
type ScalingWindow struct {
	// Cron is a 5-field cron expression ("0 8 * * 1-5") in UTC, or with a
	// CRON_TZ=Area/City prefix; @daily and the like work too.
	Cron        string   `json:"cron"`
	Duration    Duration `json:"duration"`
	MinReplicas int      `json:"min_replicas"`
}

// AutoLeadTime reports whether the lead time is learned.
func (s ServiceSpec) AutoLeadTime() bool { return s.LeadTime == "" || s.LeadTime == "auto" }

// FixedLeadTime returns the configured lead time; ok is false for "auto".
func (s ServiceSpec) FixedLeadTime() (d time.Duration, ok bool) {
	if s.AutoLeadTime() {
		return 0, false
	}
	d, err := time.ParseDuration(s.LeadTime)
	return d, err == nil
}

// Normalize fills defaults for fields left out, never overriding a value
// that was given.
func (s *ServiceSpec) Normalize() {
	if s.Tolerance == 0 {
		s.Tolerance = DefaultTolerance
	}
	if s.DownscaleDelay == 0 {
		s.DownscaleDelay = Duration(DefaultDownscaleDelay)
	}
	if s.LeadTime == "" {
		s.LeadTime = DefaultLeadTime
	}
	if s.Placement == "" {
		s.Placement = DefaultPlacement
	}
	if s.Resources.GPUs == 0 {
		s.Resources.GPUs = DefaultGPUs
	}
	s.Placement = Placement(strings.ToLower(string(s.Placement)))
	if !s.Serves() {
		return
	}
	if s.Readiness == nil {
		s.Readiness = &Readiness{}
	}
	r := s.Readiness
	if r.Path == "" {
		r.Path = DefaultReadinessPath
	}
	if r.InitialDelay == 0 {
		r.InitialDelay = Duration(DefaultInitialDelay)
	}
	if r.Period == 0 {
		r.Period = Duration(DefaultReadinessPeriod)
	}
	if r.Timeout == 0 {
		r.Timeout = Duration(min(DefaultReadinessTimeout, r.Period.D()))
	}
	if s.MaxConcurrency == 0 {
		s.MaxConcurrency = DefaultMaxConcurrency
	}
	if s.QueueTimeout == 0 {
		s.QueueTimeout = Duration(DefaultQueueTimeout)
	}
	if s.DrainTimeout == 0 {
		s.DrainTimeout = Duration(DefaultDrainTimeout)
	}
	if s.SLO == nil {
		s.SLO = &SLO{}
	}
	if s.SLO.Latency == 0 {
		s.SLO.Latency = Duration(DefaultSLOLatency)
	}
}

// ReadyBy is how long after its server starts a replica must have
// answered a readiness probe: initial_delay, plus a grace of one period
// and one timeout, so that the probe due at initial_delay is counted.
func (r Readiness) ReadyBy() time.Duration {
	return r.InitialDelay.D() + r.Period.D() + r.Timeout.D()
}

// ParseServiceSpec reads a ServiceSpec from YAML or JSON, rejecting
// unknown fields, fills defaults and validates it.
func ParseServiceSpec(data []byte) (ServiceSpec, error) {
	var s ServiceSpec
	if err := DecodeStrict(data, &s, "ServiceSpec", MaxDocumentBytes); err != nil {
		return ServiceSpec{}, err
	}
	s.Normalize()
	return s, s.Validate()
}

// ReadServiceSpec reads and parses a ServiceSpec file.
func ReadServiceSpec(path string) (ServiceSpec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return ServiceSpec{}, err
	}
	s, err := ParseServiceSpec(data)
	if err != nil {
		return s, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// Validate checks a normalised spec and returns a *ValidationError listing
// every problem, or nil.
func (s *ServiceSpec) Validate() error {
	var fe fieldErrors
	checkID(&fe, s.ID, "give the service a unique id such as chat-13b")
	checkTeam(&fe, s.Team)
	if s.Priority < 0 || s.Priority > MaxPriority {
		fe.add("priority", fmt.Sprintf("%d is out of range", s.Priority), "use an integer from 0 (lowest) to 100 (highest)")
	}
	s.validateReplicas(&fe)
	s.validateTarget(&fe)
	if s.Tolerance < 0 || s.Tolerance >= 1 {
		fe.add("tolerance", fmt.Sprintf("%g is out of range", s.Tolerance), "give a share below 1, e.g. 0.1 to ignore falls within 10%")
	}
	checkDelay(&fe, "upscale_delay", s.UpscaleDelay, "give a duration such as 30s, or leave it out to scale up at once")
	checkDelay(&fe, "downscale_delay", s.DownscaleDelay, "give a duration such as 10m")
	if len(s.Schedules) > MaxSchedules {
		fe.add("schedules", fmt.Sprintf("lists %d windows", len(s.Schedules)), fmt.Sprintf("list at most %d; one cron expression can open a window on many days", MaxSchedules))
	} else {
		for i, w := range s.Schedules {
			s.validateWindow(&fe, fmt.Sprintf("schedules[%d]", i), w)
		}
	}
	if !s.AutoLeadTime() {
		const fix = "write a duration such as 5m, or auto to learn it"
		d, err := parseDurationText(s.LeadTime)
		switch {
		case err != nil:
			fe.add("lead_time", fmt.Sprintf("%q is not a duration", clip(s.LeadTime)), fix)
		default:
			checkDelay(&fe, "lead_time", Duration(d), fix)
		}
	}
	checkDelay(&fe, "model_load", s.ModelLoad, "give a duration such as 90s, or leave it out if replicas serve as soon as their instance runs")
	s.validateServing(&fe)
	if s.WarmPool < 0 || (s.MaxReplicas >= 1 && s.WarmPool > s.MaxReplicas) || s.WarmPool > MaxReplicas {
		fe.add("warm_pool", fmt.Sprintf("%d is out of range", s.WarmPool), "keep 0 to max_replicas prepared instances")
	}
	if s.Placement != PlacementSpotFirst && s.Placement != PlacementOnDemand {
		fe.add("placement", fmt.Sprintf("%q is not a placement", clip(string(s.Placement))), "use spot-first or on-demand")
	}
	s.Resources.validate(&fe, "ask for 1 or more GPUs per replica")
	if s.Resources.Nodes > 1 {
		fe.add("resources.nodes", fmt.Sprintf("%d is more than one", s.Resources.Nodes), "leave it out: each replica runs on one node; ask for more replicas instead")
	}
	if s.Resources.MinNodes > 1 || s.Resources.ShrinkAfter != 0 {
		fe.add("resources.min_nodes", "is for gangs of a training job", "leave resources.min_nodes and shrink_after out: each replica runs on one node")
	}
	return fe.err("ServiceSpec", clip(s.ID))
}

// checkDelay checks a service's duration: 0 to MaxServiceDelay.
func checkDelay(fe *fieldErrors, field string, d Duration, fix string) {
	switch {
	case d < 0:
		fe.add(field, "is negative", fix)
	case d.D() > MaxServiceDelay:
		fe.add(field, fmt.Sprintf("%s is more than a day", d), fix+", at most 24h")
	}
}

// validateServing checks the fields of a service with a command, and
// that a capacity-only service sets none of them.
func (s *ServiceSpec) validateServing(fe *fieldErrors) {
	if !s.Serves() {
		const fix = "set command to the model server, or leave the serving fields out for a capacity-only service"
		for _, f := range []struct {
			name string
			set  bool
		}{
			{"env", len(s.Env) > 0}, {"workdir", s.Workdir != ""}, {"readiness", s.Readiness != nil},
			{"max_concurrency", s.MaxConcurrency != 0}, {"queue_timeout", s.QueueTimeout != 0},
			{"drain_timeout", s.DrainTimeout != 0}, {"slo", s.SLO != nil}, {"target.concurrency", s.Target.Concurrency != 0},
		} {
			if f.set {
				fe.add(f.name, "is for a service with a command", fix)
			}
		}
		return
	}
	checkCommand(fe, s.Command, `name the model server, listening on $REFUEL_PORT, e.g. [sh, -c, "vllm serve MODEL --port $REFUEL_PORT"]`)
	checkEnv(fe, s.Env, "the model server")
	checkWorkdir(fe, s.Workdir)
	if s.ModelLoad != 0 {
		fe.add("model_load", "is measured when a command runs", "leave model_load out: the time from the server's start to its first ready probe is measured")
	}
	if r := s.Readiness; r != nil {
		switch p := r.Path; {
		case len(p) > MaxReadinessPathBytes:
			fe.add("readiness.path", fmt.Sprintf("is %d bytes long", len(p)), fmt.Sprintf("use a path of at most %d bytes, e.g. /healthz", MaxReadinessPathBytes))
		case !strings.HasPrefix(p, "/") || strings.IndexFunc(p, func(c rune) bool { return c <= ' ' || c == 0x7f }) >= 0:
			fe.add("readiness.path", fmt.Sprintf("%q is not a URL path", clip(p)), "give a path starting with /, without spaces, e.g. /healthz")
		}
		checkRange(fe, "readiness.initial_delay", r.InitialDelay.D(), 0, MaxInitialDelay, "give how long the server may take to load its model, e.g. 5m")
		checkRange(fe, "readiness.period", r.Period.D(), MinReadinessPeriod, MaxReadinessPeriod, "give how often to probe, e.g. 2s")
		checkRange(fe, "readiness.timeout", r.Timeout.D(), MinReadinessPeriod, MaxReadinessPeriod, "give how long one probe may take, e.g. 1s")
		if r.Timeout > r.Period && r.Period > 0 {
			fe.add("readiness.timeout", fmt.Sprintf("%s is longer than the period %s", r.Timeout, r.Period), "give a timeout of at most readiness.period")
		}
	}
	if s.MaxConcurrency < 0 || s.MaxConcurrency > MaxConcurrency {
		fe.add("max_concurrency", fmt.Sprintf("%d is outside 0..%d", s.MaxConcurrency, MaxConcurrency), "give the requests one replica takes at once, e.g. 8")
	}
	checkRange(fe, "queue_timeout", s.QueueTimeout.D(), 0, MaxQueueTimeout, "give how long a request may wait for a replica, e.g. 30s")
	checkRange(fe, "drain_timeout", s.DrainTimeout.D(), 0, MaxDrainTimeout, "give how long a replica finishes its requests before release, e.g. 30s")
	if s.SLO != nil {
		checkRange(fe, "slo.latency", s.SLO.Latency.D(), 0, MaxSLOLatency, "give the latency a request should be answered within, e.g. 500ms")
	}
}

// checkRange checks a duration field against [lo, hi].
func checkRange(fe *fieldErrors, field string, d, lo, hi time.Duration, fix string) {
	switch {
	case d < 0:
		fe.add(field, "is negative", fix)
	case d < lo:
		fe.add(field, fmt.Sprintf("%s is under %s", d, lo), fix)
	case d > hi:
		fe.add(field, fmt.Sprintf("%s is more than %s", d, hi), fix+", at most "+hi.String())
	}
}

func (s *ServiceSpec) validateReplicas(fe *fieldErrors) {
	if s.MinReplicas < 0 {
		fe.add("min_replicas", fmt.Sprintf("%d is negative", s.MinReplicas), "keep 0 or more replicas")
	}
	switch {
	case s.MaxReplicas < 1:
		fe.add("max_replicas", "must be at least 1", "give the most replicas the service may have")
	case s.MaxReplicas > MaxReplicas:
		fe.add("max_replicas", fmt.Sprintf("%d is above %d", s.MaxReplicas, MaxReplicas), fmt.Sprintf("give at most %d replicas; run a second service for more", MaxReplicas))
	case s.MaxReplicas < s.MinReplicas:
		fe.add("max_replicas", fmt.Sprintf("%d is below min_replicas %d", s.MaxReplicas, s.MinReplicas), "raise max_replicas or lower min_replicas")
	}
}

func (s *ServiceSpec) validateTarget(fe *fieldErrors) {
	t := s.Target
	switch {
	case t.QPS < 0:
		fe.add("target.qps", "is negative", "give the requests per second one replica serves well, e.g. 2.5")
	case t.QPS > MaxTargetPerReplica:
		fe.add("target.qps", fmt.Sprintf("%g is above a million", t.QPS), "give the requests per second one replica serves well, e.g. 2.5")
	}
	switch {
	case t.QueueLength < 0:
		fe.add("target.queue_length", "is negative", "give the waiting requests per replica to allow, e.g. 4")
	case t.QueueLength > MaxTargetPerReplica:
		fe.add("target.queue_length", fmt.Sprintf("%g is above a million", t.QueueLength), "give the waiting requests per replica to allow, e.g. 4")
	}
	switch {
	case t.Concurrency < 0:
		fe.add("target.concurrency", "is negative", "give the requests in flight one replica serves well, e.g. 4")
	case t.Concurrency > MaxTargetPerReplica:
		fe.add("target.concurrency", fmt.Sprintf("%g is above a million", t.Concurrency), "give the requests in flight one replica serves well, e.g. 4")
	}
	if t.GPUUtilization < 0 || t.GPUUtilization > 1 {
		fe.add("target.gpu_utilization", fmt.Sprintf("%g is out of range", t.GPUUtilization), "give a share in (0, 1], e.g. 0.8 for 80%")
	}
	switch {
	case t.QPS == 0 && t.QueueLength == 0 && t.GPUUtilization == 0 && t.Concurrency == 0:
		fe.add("target", "sets no target", "set at least one of qps, queue_length, concurrency, gpu_utilization")
	case s.MinReplicas == 0 && t.QPS <= 0 && t.QueueLength <= 0 && t.Concurrency <= 0:
		// With no replica running there is no utilisation to measure,
		// so nothing would ever bring the service back from zero.
		fe.add("target", "has only gpu_utilization, which cannot wake a service scaled to zero", "set target.qps or target.queue_length, or min_replicas of 1 or more")
	}
}

func (s *ServiceSpec) validateWindow(fe *fieldErrors, at string, w ScalingWindow) {
	const cronFix = "write 5 fields: minute hour day-of-month month day-of-week, e.g. \"0 8 * * 1-5\""
	if len(w.Cron) > MaxCronLength {
		fe.add(at+".cron", fmt.Sprintf("is %d characters long", len(w.Cron)), cronFix+fmt.Sprintf(", within %d characters", MaxCronLength))
	} else if _, err := ParseCron(w.Cron); err != nil {
		fe.add(at+".cron", fmt.Sprintf("%q: %v", clip(w.Cron), err), cronFix)
	}
	switch {
	case w.Duration <= 0:
		fe.add(at+".duration", "must be a positive duration", "say how long the window stays open, e.g. 10h")
	case w.Duration.D() > MaxWindow:
		fe.add(at+".duration", fmt.Sprintf("%s is more than 31 days", w.Duration), "keep a window open at most 744h; use min_replicas for a floor that always holds")
	}
	if w.MinReplicas < 0 || (s.MaxReplicas >= 1 && w.MinReplicas > s.MaxReplicas) || w.MinReplicas > MaxReplicas {
		fe.add(at+".min_replicas", fmt.Sprintf("%d is out of range", w.MinReplicas), fmt.Sprintf("give a floor from 0 to max_replicas (%d)", s.MaxReplicas))
	}
}

// ParseCron reads a standard 5-field cron expression.
func ParseCron(expr string) (cron.Schedule, error) {
	// The parser slices out of range on a zone prefix with nothing after
	// it ("TZ=UTC"): refuse that first.
	if (strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ=")) && !strings.Contains(expr, " ") {
		return nil, fmt.Errorf("the time zone %s is not followed by a schedule", expr)
	}
	return cron.ParseStandard(expr)
}
