package controlplane

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"refuel/workflows/capacitypool"
	"refuel/workflows/inference"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"refuel/internal/telemetry"
	"refuel/pkg/capacity"
	"refuel/workflows"
)

// scrapeTimeout bounds what one scrape waits for providers and queries,
// well under Prometheus' default scrape timeout of 10s.
const scrapeTimeout = 5 * time.Second

// maxServicesScraped bounds the services whose replicas one scrape asks.
const maxServicesScraped = 200

// stateCollector exports, at every scrape, gauges of what the control
// plane holds: the instances each provider runs with refuel's tags, the
// capacity pool's queue and base GPUs (its status query), and each
// running service's replicas (their status queries). Read live rather
// than recorded by workflows, they are right after a restart too.
type stateCollector struct {
	providers []layeredProvider
	client    client.Client
	namespace string
	pool      bool // a CapacityPool runs
	log       *zap.Logger

	instances, queue, baseGPUs, baseFree, replicas, desired *prometheus.Desc
}

// layeredProvider is a provider and the capacity layer it is.
type layeredProvider struct {
	capacity.Provider
	layer string
}

func newStateCollector(providers []layeredProvider, c client.Client, namespace string, pool bool, log *zap.Logger) *stateCollector {
	return &stateCollector{
		providers: providers, client: c, namespace: namespace, pool: pool, log: log,
		instances: prometheus.NewDesc(telemetry.InstancesHeld, "Instances refuel holds now, by provider, cloud, market, layer (base or burst), zone, instance type and team.",
			[]string{telemetry.LabelProvider, telemetry.LabelCloud, telemetry.LabelMarket, telemetry.LabelLayer, telemetry.LabelZone, telemetry.LabelInstanceType, telemetry.LabelTeam}, nil),
		queue:    prometheus.NewDesc(telemetry.QueueDepth, "Requests waiting in the capacity pool's admission queue, by workload (training or service).", []string{telemetry.LabelWorkload}, nil),
		baseGPUs: prometheus.NewDesc(telemetry.BaseGPUs, "GPUs of the base group.", nil, nil),
		baseFree: prometheus.NewDesc(telemetry.BaseGPUsFree, "GPUs of the base group no allocation holds.", nil, nil),
		replicas: prometheus.NewDesc(telemetry.ServiceReplicas, "An inference service's replicas, by state (ready, starting, warm, releasing) and layer.",
			[]string{telemetry.LabelService, telemetry.LabelTeam, telemetry.LabelState, telemetry.LabelLayer}, nil),
		desired: prometheus.NewDesc(telemetry.ServiceDesiredReplica, "The replicas an inference service's autoscaler wants now.", []string{telemetry.LabelService, telemetry.LabelTeam}, nil),
	}
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.instances, c.queue, c.baseGPUs, c.baseFree, c.replicas, c.desired} {
		ch <- d
	}
}

// Collect reads the three sources side by side; one that fails or is
// slow leaves its gauges out of this scrape (and says so in the log),
// never the others.
func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, read := range []func(context.Context, chan<- prometheus.Metric) error{c.collectInstances, c.collectPool, c.collectServices} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := read(ctx, ch); err != nil {
				c.log.Debug("metrics: gauge left out of this scrape", zap.Error(err))
			}
		}()
	}
	wg.Wait()
}

// instanceKey is one series of refuel_instances.
type instanceKey struct{ provider, cloud, market, layer, zone, itype, team string }

func (c *stateCollector) collectInstances(ctx context.Context, ch chan<- prometheus.Metric) error {
	counts := map[instanceKey]int{}
	var errs []error
	for _, p := range c.providers {
		insts, err := p.List(ctx, map[string]string{capacity.TagManagedBy: capacity.ManagedBy})
		if err != nil {
			errs = append(errs, fmt.Errorf("list %s: %w", p.Name(), err))
			continue
		}
		for _, in := range insts {
			o := in.Offering
			cloud := telemetry.CloudOf(o.Key())
			if cloud == "" { // an instance whose offering names no provider is its lister's
				cloud = p.Name()
			}
			counts[instanceKey{p.Name(), cloud, string(o.Market), p.layer, o.Zone, o.InstanceType, in.Tags[capacity.TagTeam]}]++
		}
	}
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.instances, prometheus.GaugeValue, float64(n), k.provider, k.cloud, k.market, k.layer, k.zone, k.itype, k.team)
	}
	return errors.Join(errs...)
}

func (c *stateCollector) collectPool(ctx context.Context, ch chan<- prometheus.Metric) error {
	if !c.pool {
		return nil
	}
	var st capacitypool.Status
	v, err := c.client.QueryWorkflow(ctx, workflows.PoolWorkflowID, "", workflows.QueryStatus)
	if err == nil {
		err = v.Get(&st)
	}
	if err != nil {
		return fmt.Errorf("capacity pool status: %w", err)
	}
	waiting := map[string]int{telemetry.WorkloadTraining: 0, telemetry.WorkloadService: 0}
	for _, q := range st.Waiting {
		waiting[string(q.Kind)]++
	}
	for w, n := range waiting {
		ch <- prometheus.MustNewConstMetric(c.queue, prometheus.GaugeValue, float64(n), w)
	}
	ch <- prometheus.MustNewConstMetric(c.baseGPUs, prometheus.GaugeValue, float64(st.BaseGPUs))
	ch <- prometheus.MustNewConstMetric(c.baseFree, prometheus.GaugeValue, float64(st.FreeBaseGPUs))
	return nil
}

type replicaKey struct{ state, layer string }

func (c *stateCollector) collectServices(ctx context.Context, ch chan<- prometheus.Metric) error {
	resp, err := c.client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Namespace: c.namespace, PageSize: maxServicesScraped,
		Query: fmt.Sprintf("WorkflowType = %q AND ExecutionStatus = 'Running'", workflows.InferenceServiceName),
	})
	if err != nil {
		return fmt.Errorf("list services: %w", err)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(resp.GetExecutions()))
	for i, e := range resp.GetExecutions() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.collectService(ctx, e.GetExecution().GetWorkflowId(), ch)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (c *stateCollector) collectService(ctx context.Context, id string, ch chan<- prometheus.Metric) error {
	var st inference.Status
	v, err := c.client.QueryWorkflow(ctx, id, "", workflows.QueryStatus)
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		return nil // it ended since the list
	}
	if err == nil {
		err = v.Get(&st)
	}
	if err != nil {
		return fmt.Errorf("status of service %s: %w", id, err)
	}
	counts := map[replicaKey]int{{string(inference.ReplicaReady), ""}: 0}
	for _, r := range st.Replicas {
		counts[replicaKey{string(r.State), string(r.Layer)}]++
	}
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.replicas, prometheus.GaugeValue, float64(n), id, st.Team, k.state, k.layer)
	}
	ch <- prometheus.MustNewConstMetric(c.desired, prometheus.GaugeValue, float64(st.Desired.Replicas), id, st.Team)
	return nil
}

// readiness is what /readyz checks: the cluster answers, and this
// worker's poller was seen on the control-plane task queue lately.
func (s *Stack) readiness() map[string]telemetry.Check {
	return map[string]telemetry.Check{
		"cluster": func(ctx context.Context) error {
			if _, err := s.Client.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
				return fmt.Errorf("Temporal at %s does not answer: %v", s.Address, err)
			}
			return nil
		},
		"worker": func(ctx context.Context) error {
			if s.stopping.Load() {
				return errors.New("the worker is shutting down")
			}
			resp, err := s.Client.DescribeTaskQueue(ctx, workflows.TaskQueue, enums.TASK_QUEUE_TYPE_WORKFLOW)
			if err != nil {
				return fmt.Errorf("describe task queue %s: %v", workflows.TaskQueue, err)
			}
			for _, p := range resp.GetPollers() {
				if p.GetIdentity() == s.identity && time.Since(p.GetLastAccessTime().AsTime()) < pollerFresh {
					return nil
				}
			}
			return fmt.Errorf("this worker (%s) has not polled task queue %s in the last %s", s.identity, workflows.TaskQueue, pollerFresh)
		},
	}
}

// pollerFresh is how recent a poll must be: a long poll on an idle task
// queue lasts about a minute before the worker polls again.
const pollerFresh = 2 * time.Minute
