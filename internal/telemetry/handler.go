package telemetry

import (
	"maps"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"
)

// handler is the Temporal SDK's MetricsHandler over Prometheus. refuel's
// own metrics (the catalogue) become native Prometheus counters and
// histograms, each with its help, its fixed labels and, for a Timer, the
// buckets that suit what it times; the SDK's own metrics go on to sdk (a
// tally scope reporting into the same registry). Workflow code reaches it
// through workflow.GetMetricsHandler, which records nothing on replay.
type handler struct {
	vecs *vecs
	tags map[string]string
	sdk  client.MetricsHandler
}

// vecs are the registered Prometheus collectors of the catalogue.
type vecs struct {
	defs       map[string]definition
	counters   map[string]*prometheus.CounterVec
	histograms map[string]*prometheus.HistogramVec
}

func newVecs(reg prometheus.Registerer) (*vecs, error) {
	v := &vecs{defs: map[string]definition{}, counters: map[string]*prometheus.CounterVec{}, histograms: map[string]*prometheus.HistogramVec{}}
	for _, d := range catalogue {
		v.defs[d.name] = d
		var c prometheus.Collector
		switch d.kind {
		case counterKind:
			cv := prometheus.NewCounterVec(prometheus.CounterOpts{Name: d.name, Help: d.help}, d.labels)
			v.counters[d.name], c = cv, cv
		case histogramKind:
			hv := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: d.name, Help: d.help, Buckets: d.buckets}, d.labels)
			v.histograms[d.name], c = hv, hv
		}
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return v, nil
}

func (h handler) WithTags(tags map[string]string) client.MetricsHandler {
	merged := maps.Clone(h.tags)
	if merged == nil {
		merged = map[string]string{}
	}
	maps.Copy(merged, tags)
	return handler{vecs: h.vecs, tags: merged, sdk: h.sdk.WithTags(tags)}
}

func (h handler) Counter(name string) client.MetricsCounter {
	cv, ok := h.vecs.counters[name]
	if !ok {
		return h.sdk.Counter(name)
	}
	d := h.vecs.defs[name]
	c := cv.WithLabelValues(h.values(d)...)
	scale := d.scale
	if scale == 0 {
		scale = 1
	}
	return counter{c: c, scale: scale}
}

// Gauge: refuel's gauges are read at scrape time by collectors, so every
// gauge recorded through the handler is the SDK's.
func (h handler) Gauge(name string) client.MetricsGauge { return h.sdk.Gauge(name) }

func (h handler) Timer(name string) client.MetricsTimer {
	hv, ok := h.vecs.histograms[name]
	if !ok {
		return h.sdk.Timer(name)
	}
	return timer{o: hv.WithLabelValues(h.values(h.vecs.defs[name])...)}
}

// Unwrap lets go.temporal.io/sdk/contrib/tally.ScopeFromHandler find the
// tally scope under this handler.
func (h handler) Unwrap() client.MetricsHandler { return h.sdk }

// values are the handler's tags for a definition's labels, in order.
func (h handler) values(d definition) []string {
	out := make([]string, len(d.labels))
	for i, l := range d.labels {
		out[i] = h.tags[l]
	}
	return out
}

type counter struct {
	c     prometheus.Counter
	scale float64
}

// Inc adds n; a Prometheus counter only goes up, so a negative n (a bug
// in the caller) is dropped rather than let panic a workflow task.
func (c counter) Inc(n int64) {
	if n > 0 {
		c.c.Add(float64(n) * c.scale)
	}
}

type timer struct{ o prometheus.Observer }

func (t timer) Record(d time.Duration) { t.o.Observe(d.Seconds()) }
