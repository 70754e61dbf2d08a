package telemetry

import (
	"math"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"refuel/pkg/admission"
	"refuel/pkg/capacity"
	"refuel/pkg/cost"
)

// Names of refuel's own metrics, as code passes them to a MetricsHandler
// and as /metrics shows them. Dashboards and alerts depend on them: add,
// never rename.
const (
	// Counters.
	AcquisitionsTotal = "refuel_acquisitions_total"
	ReleasesTotal     = "refuel_releases_total"
	PreemptionsTotal  = "refuel_preemptions_total"
	RecoveriesTotal   = "refuel_recoveries_total"
	// NodeReplacementsTotal counts a gang's nodes replaced while the
	// others waited at their checkpoint.
	NodeReplacementsTotal = "refuel_node_replacements_total"
	CheckpointsTotal      = "refuel_checkpoints_total"
	LostWorkSeconds       = "refuel_lost_work_seconds_total"
	CostUSDTotal          = "refuel_cost_usd_total"
	// ControlPlaneOutagesTotal counts the times a run lost touch with
	// the agent of an instance its cloud still ran (the cluster was away
	// or slow) and attached to its attempt again; ControlPlaneRestarts
	// the trainers stopped meanwhile, past the run's tolerance, and
	// trained again from their checkpoint on the same instance.
	ControlPlaneOutagesTotal  = "refuel_control_plane_outages_total"
	ControlPlaneRestartsTotal = "refuel_control_plane_restarts_total"

	// Histograms (Timers through the SDK's handler), in seconds.
	AcquisitionSeconds      = "refuel_acquisition_seconds"
	AdmissionWaitSeconds    = "refuel_admission_wait_seconds"
	RecoverySeconds         = "refuel_recovery_seconds"
	CheckpointUploadSeconds = "refuel_checkpoint_upload_seconds"

	// Gauges the control plane reads at every scrape (controlplane's
	// collectors), not recorded through a handler.
	InstancesHeld         = "refuel_instances"
	QueueDepth            = "refuel_admission_queue_depth"
	BaseGPUs              = "refuel_base_gpus"
	BaseGPUsFree          = "refuel_base_gpus_free"
	ServiceReplicas       = "refuel_service_replicas"
	ServiceDesiredReplica = "refuel_service_desired_replicas"
)

// Label keys. A metric's labels are the tags of these names the handler
// carries when it is recorded (WithTags); a missing one is empty, and
// other tags (the SDK's namespace, task queue, workflow type) are not
// exported on refuel's metrics, so each keeps one fixed set of labels.
const (
	LabelProvider = "provider"
	// LabelCloud is the cloud of an instance, offering or cost: the first
	// segment of the offering's key (aws, gce, sim, local, base), so a
	// market of several clouds reads apart by cloud.
	LabelCloud        = "cloud"
	LabelMarket       = "market" // spot, on-demand, base
	LabelZone         = "zone"
	LabelInstanceType = "instance_type"
	LabelLayer        = "layer" // base or burst
	LabelPool         = "pool"  // the cost ledger's pool of a segment
	LabelTeam         = "team"
	LabelOutcome      = "outcome" // acquired, or the failure class
	LabelReason       = "reason"  // a release's reason
	LabelWorkload     = "workload"
	LabelService      = "service"
	LabelState        = "state"
)

// Workloads, the values of LabelWorkload.
const (
	WorkloadTraining = "training"
	WorkloadService  = "service"
)

// kind is how a metric is kept in Prometheus.
type kind int

const (
	counterKind kind = iota
	histogramKind
)

// definition is one of refuel's metrics recorded through the handler.
type definition struct {
	name   string
	kind   kind
	help   string
	labels []string
	// buckets are a histogram's upper bounds, in seconds.
	buckets []float64
	// scale is what one unit a counter is incremented by is worth, for
	// amounts an int64 cannot count directly (cost in micro-dollars).
	scale float64
}

var (
	capacityLabels = []string{LabelProvider, LabelCloud, LabelMarket, LabelZone}
	// Seconds to minutes: a launch answers in under a second on the sims
	// and takes minutes on a cloud that boots machines.
	acquisitionBuckets = []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}
	// Seconds to a day: flexible runs may queue that long for the base.
	admissionBuckets = []float64{1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 43200, 86400}
	// A notice window is 2 minutes on EC2; recovery past half an hour
	// means the market had nothing.
	recoveryBuckets = []float64{1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600, 1800, 3600}
	uploadBuckets   = []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}
)

// catalogue is every metric refuel records through a MetricsHandler.
var catalogue = []definition{
	{name: AcquisitionsTotal, kind: counterKind, help: "Acquisition attempts per offering tried, by outcome (acquired or the failure class).",
		labels: []string{LabelProvider, LabelCloud, LabelMarket, LabelOutcome}},
	{name: ReleasesTotal, kind: counterKind, help: "Instances released, by reason (completed, preempted, yielded, changeover, cleanup, ...).",
		labels: []string{LabelProvider, LabelCloud, LabelMarket, LabelReason}},
	{name: PreemptionsTotal, kind: counterKind, help: "Instances a cloud took back from a run or a service.", labels: capacityLabels},
	{name: RecoveriesTotal, kind: counterKind, help: "Runs resumed from a checkpoint on a replacement instance."},
	{name: NodeReplacementsTotal, kind: counterKind, help: "Nodes of a gang replaced, the other nodes kept, after the market took them."},
	{name: CheckpointsTotal, kind: counterKind, help: "Checkpoints uploaded and verified."},
	{name: ControlPlaneOutagesTotal, kind: counterKind, help: "Training attempts the cluster lost touch with while their instance ran, attached to again (cause control-plane)."},
	{name: ControlPlaneRestartsTotal, kind: counterKind, help: "Trainers stopped at a checkpoint because no run attached within the control-plane tolerance, trained again on the same instance."},
	{name: LostWorkSeconds, kind: counterKind, help: "Training work lost to preemptions, to be computed again, in seconds.", labels: capacityLabels},
	{name: CostUSDTotal, kind: counterKind, help: "Instance time paid for, in US dollars, counted when a ledger segment closes.",
		labels: []string{LabelTeam, LabelProvider, LabelCloud, LabelMarket, LabelLayer, LabelPool}, scale: 1e-6},
	{name: AcquisitionSeconds, kind: histogramKind, help: "Time a provider took to answer one acquisition request, by outcome.",
		labels: []string{LabelProvider, LabelCloud, LabelMarket, LabelOutcome}, buckets: acquisitionBuckets},
	{name: AdmissionWaitSeconds, kind: histogramKind, help: "Time from asking the capacity pool for an instance to being admitted.",
		labels: []string{LabelWorkload, LabelLayer}, buckets: admissionBuckets},
	{name: RecoverySeconds, kind: histogramKind, help: "Time from a preemption (its notice, or its detection) to training resumed on a replacement.",
		labels: capacityLabels, buckets: recoveryBuckets},
	{name: CheckpointUploadSeconds, kind: histogramKind, help: "Time a node agent took to upload and verify one checkpoint.",
		labels: []string{LabelProvider, LabelCloud, LabelMarket}, buckets: uploadBuckets},
}

// ObserveRecovery records a recovery: from the preemption's notice (or
// its detection) to training resumed on the replacement o. Workflow code
// calls it with workflow.GetMetricsHandler(ctx), which records nothing on
// replay.
func ObserveRecovery(h client.MetricsHandler, o capacity.Offering, d time.Duration) {
	h.WithTags(OfferingTags(o)).Timer(RecoverySeconds).Record(d)
}

// ObserveAdmissionWait records how long a request waited for the pool to
// admit it; workload is WorkloadTraining or WorkloadService and layer the
// one it was placed on (admission.BaseLayer or BurstLayer).
func ObserveAdmissionWait(h client.MetricsHandler, workload, layer string, d time.Duration) {
	h.WithTags(map[string]string{LabelWorkload: workload, LabelLayer: layer}).Timer(AdmissionWaitSeconds).Record(d)
}

// ObserveCheckpointUpload records one checkpoint upload the node agent on
// an instance of o timed.
func ObserveCheckpointUpload(h client.MetricsHandler, o capacity.Offering, d time.Duration) {
	h.WithTags(map[string]string{LabelProvider: o.Provider, LabelCloud: CloudOf(o.Key()), LabelMarket: string(o.Market)}).Timer(CheckpointUploadSeconds).Record(d)
}

// CountCost adds what a closed ledger segment cost to the team's cost
// counter. Call it once per segment, when it closes; an open segment
// counts nothing.
func CountCost(h client.MetricsHandler, team string, seg cost.Segment) {
	if seg.End.IsZero() {
		return
	}
	micro := math.Round(seg.USD(seg.End) * 1e6)
	if !(micro > 0) {
		return
	}
	h.WithTags(map[string]string{
		LabelTeam: team, LabelProvider: providerOf(seg.Offering), LabelCloud: CloudOf(seg.Offering), LabelMarket: seg.Market,
		LabelLayer: LayerOf(capacity.Market(seg.Market)), LabelPool: seg.Pool,
	}).Counter(CostUSDTotal).Inc(int64(micro))
}

// CountClosedCost counts, with CountCost, the segments of instanceID that
// the ledger closed at end: call it right after ledger.Close(instanceID,
// end).
func CountClosedCost(h client.MetricsHandler, team string, l cost.Ledger, instanceID string, end time.Time) {
	for _, seg := range l.Segments {
		if seg.InstanceID == instanceID && seg.End.Equal(end) {
			CountCost(h, team, seg)
		}
	}
}

// LayerOf is the capacity layer of a market: the base group's machines,
// or the public burst pools.
func LayerOf(m capacity.Market) string {
	if m == capacity.Base {
		return string(admission.BaseLayer)
	}
	return string(admission.BurstLayer)
}

// OfferingTags are the capacity labels (provider, cloud, market, zone) of
// an offering, for WithTags.
func OfferingTags(o capacity.Offering) map[string]string {
	return map[string]string{LabelProvider: o.Provider, LabelCloud: CloudOf(o.Key()), LabelMarket: string(o.Market), LabelZone: o.Zone}
}

// CloudOf is the value of LabelCloud for an offering's key: its first
// segment (gce of gce/a3-highgpu-1g/us-central1-a/spot).
func CloudOf(offeringKey string) string {
	cloud, _, _ := strings.Cut(offeringKey, "/")
	return cloud
}

// providerOf reads the provider from an offering key (provider/type/zone/market).
func providerOf(key string) string {
	provider, _, _ := strings.Cut(key, "/")
	return provider
}
