// Package balancers hosts the balancers of the running inference services
// on the Temporal side: it finds the services, reads each one's replicas
// and serving settings from its status query twice a second, gives each a
// listener of its own, and reports what each balancer measured to its
// service as the traffic signal. It keeps nothing of its own: a host that
// restarts learns everything again from the services' status, so hosts run
// in every control-plane worker and as `worker balancer`, several at once.
package balancers

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"

	"refuel/pkg/balancer"
	"refuel/pkg/serving"
)

// Defaults of Config.
const (
	// DefaultPollEvery is how often each service's status is read: a
	// replica ready, draining or lost is routed accordingly within it.
	DefaultPollEvery = 500 * time.Millisecond
	// DefaultListEvery is how often the running services are listed.
	DefaultListEvery = 2 * time.Second
	// DefaultKeepFor is how long a service whose status cannot be read
	// (the cluster away) is served with the replicas it had last.
	DefaultKeepFor = 5 * time.Minute
	// keepAlive is the longest a balancer of an idle service goes without
	// reporting, so that its service keeps knowing the endpoint.
	keepAlive = time.Minute
)

// Status is what a host reads of a service's status query.
type Status struct {
	// Endpoint is where the service's clients are sent; a restarted host
	// listens on its port again when it can.
	Endpoint string            `json:"endpoint,omitempty"`
	Replicas []serving.Replica `json:"replicas"`
	// Serving is nil for a capacity-only service: no balancer.
	Serving *serving.Settings `json:"serving"`
}

// GoneError says a service's workflow is no longer running.
type GoneError struct {
	ID  string
	Err error
}

func (e *GoneError) Error() string { return "service " + e.ID + " is not running: " + e.Err.Error() }

func (e *GoneError) Unwrap() error { return e.Err }

// Source is what a host asks of Temporal.
type Source interface {
	// Services are the ids of the running InferenceService workflows.
	Services(ctx context.Context) ([]string, error)
	// Status is one service's status; a *GoneError when it has ended.
	Status(ctx context.Context, id string) (Status, error)
	// Report sends a balancer's traffic to its service.
	Report(ctx context.Context, id string, r serving.Report) error
}

// Config is a host's.
type Config struct {
	// Host is the address listeners bind, and clients are told
	// (default 127.0.0.1).
	Host      string
	PollEvery time.Duration
	ListEvery time.Duration
	KeepFor   time.Duration
	Metrics   *balancer.Metrics // nil: no Prometheus
	Log       *zap.Logger
	now       func() time.Time
}

// Host is the balancers of one process.
type Host struct {
	cfg Config
	src Source

	mu       sync.Mutex
	services map[string]*service
	listed   time.Time // last successful list
	reports  sync.WaitGroup
}

// service is one service's balancer and listener.
type service struct {
	id       string
	b        *balancer.Balancer
	srv      *http.Server
	ln       net.Listener
	addr     string
	settings serving.Settings // as last read
	statusAt time.Time        // last status read
	running  bool             // in the latest list
	// capacityOnly services have no balancer; a spec does not change, so
	// their status is not read again.
	capacityOnly bool
	// reportedAt is when its latest report went; active whether that
	// report carried any traffic.
	reportedAt time.Time
	active     bool
	// sent is closed once its latest report has gone (or failed): the
	// next waits for it, so that a service hears its balancer's reports
	// in the order they were measured, and a late one never overwrites a
	// newer one.
	sent chan struct{}
}

// New is a host reading services from src.
func New(src Source, cfg Config) *Host {
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	if cfg.PollEvery <= 0 {
		cfg.PollEvery = DefaultPollEvery
	}
	if cfg.ListEvery <= 0 {
		cfg.ListEvery = DefaultListEvery
	}
	if cfg.KeepFor <= 0 {
		cfg.KeepFor = DefaultKeepFor
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	if cfg.now == nil {
		cfg.now = time.Now
	}
	return &Host{cfg: cfg, src: src, services: map[string]*service{}}
}

// Run syncs every PollEvery until ctx ends, then closes every listener.
func (h *Host) Run(ctx context.Context) {
	defer h.Close()
	t := time.NewTicker(h.cfg.PollEvery)
	defer t.Stop()
	for {
		h.Sync(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Endpoint is the host:port a service's balancer listens on here, "" when
// it has none.
func (h *Host) Endpoint(id string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s := h.services[id]; s != nil {
		return s.addr
	}
	return ""
}

// Balancer is a service's balancer here, nil when it has none.
func (h *Host) Balancer(id string) *balancer.Balancer {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s := h.services[id]; s != nil {
		return s.b
	}
	return nil
}

// Sync is one round: list the services when due, read every one's status,
// apply it, and report traffic that is due.
func (h *Host) Sync(ctx context.Context) {
	now := h.cfg.now()
	h.mu.Lock()
	listDue := now.Sub(h.listed) >= h.cfg.ListEvery
	h.mu.Unlock()
	if listDue {
		ids, err := h.src.Services(ctx)
		if err != nil {
			h.cfg.Log.Warn("cannot list the running services: the balancers keep what they know", zap.Error(err))
		} else {
			h.applyList(ids, now)
		}
	}
	h.mu.Lock()
	var ids []string
	for id, s := range h.services {
		if s.running && !s.capacityOnly {
			ids = append(ids, id)
		}
	}
	h.mu.Unlock()

	type read struct {
		st  Status
		err error
	}
	reads := make([]read, len(ids))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i, id := range ids {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			reads[i].st, reads[i].err = h.src.Status(qctx, id)
		}()
	}
	wg.Wait()
	for i, id := range ids {
		h.apply(ctx, id, reads[i].st, reads[i].err, now)
	}
	h.report(ctx, now)
}

// applyList closes the balancers of services no longer running and marks
// the running ones to be read.
func (h *Host) applyList(ids []string, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.listed = now
	running := map[string]bool{}
	for _, id := range ids {
		running[id] = true
		if h.services[id] == nil {
			h.services[id] = &service{id: id, statusAt: now}
		}
		h.services[id].running = true
	}
	for id, s := range h.services {
		if !running[id] {
			h.closeLocked(s, "the service ended")
		}
	}
}

// apply brings one service's balancer to its status, or keeps what it
// has while the status cannot be read.
func (h *Host) apply(ctx context.Context, id string, st Status, err error, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.services[id]
	if s == nil {
		return
	}
	var gone *GoneError
	switch {
	case errors.As(err, &gone):
		h.closeLocked(s, "the service ended")
		return
	case err != nil:
		if s.b != nil && now.Sub(s.statusAt) > h.cfg.KeepFor {
			s.b.Update(nil, s.settings)
		}
		if ctx.Err() == nil {
			h.cfg.Log.Debug("cannot read a service's status: its balancer keeps the replicas it knows", zap.String("service", id), zap.Error(err))
		}
		return
	}
	s.statusAt = now
	if st.Serving == nil {
		if s.srv != nil {
			h.closeLocked(s, "the service serves no requests (capacity only)")
			h.services[id] = &service{id: id, statusAt: now, running: true}
		}
		h.services[id].capacityOnly = true
		return
	}
	if s.srv == nil {
		if err := h.listenLocked(s, st.Endpoint); err != nil {
			h.cfg.Log.Warn("cannot listen for a service", zap.String("service", id), zap.Error(err))
			return
		}
	}
	s.settings = *st.Serving
	s.b.Update(st.Replicas, s.settings)
}

// listenLocked opens a service's listener: on the port of its endpoint
// when that is this host's and the port is free, so its clients keep
// their address across restarts; else on any port.
func (h *Host) listenLocked(s *service, endpoint string) error {
	var l net.Listener
	if host, port, err := net.SplitHostPort(endpoint); err == nil && host == h.cfg.Host {
		l, _ = net.Listen("tcp", net.JoinHostPort(host, port))
	}
	if l == nil {
		var err error
		if l, err = net.Listen("tcp", net.JoinHostPort(h.cfg.Host, "0")); err != nil {
			return err
		}
	}
	s.b = balancer.New(s.id, nil, h.cfg.Metrics)
	s.srv = &http.Server{Handler: s.b, ReadHeaderTimeout: 10 * time.Second}
	s.ln, s.addr = l, l.Addr().String()
	go func() { _ = s.srv.Serve(l) }()
	h.cfg.Log.Info("balancing a service", zap.String("service", s.id), zap.String("endpoint", s.addr))
	return nil
}

func (h *Host) closeLocked(s *service, why string) {
	delete(h.services, s.id)
	if s.srv == nil {
		return
	}
	_ = s.srv.Close()
	_ = s.ln.Close() // now, whether or not Serve has begun
	h.cfg.Metrics.Forget(s.id)
	h.cfg.Log.Info("closed a service's balancer", zap.String("service", s.id), zap.String("endpoint", s.addr), zap.String("why", why))
}

// report sends each balancer's traffic when due: at most one report per
// service every serving.ReportEvery, the first as soon as it listens (so
// the service learns its endpoint), then while it has traffic, once more
// when the traffic stops, and at least every keepAlive.
func (h *Host) report(ctx context.Context, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range h.services {
		if s.b == nil || (!s.reportedAt.IsZero() && now.Sub(s.reportedAt) < serving.ReportEvery) {
			continue
		}
		t, span := s.b.Traffic()
		active := t.Requests > 0 || t.InFlight > 0 || t.Queued > 0
		if !s.reportedAt.IsZero() && !active && !s.active && now.Sub(s.reportedAt) < keepAlive {
			continue
		}
		s.reportedAt, s.active = now, active
		r := serving.Report{Balancer: s.addr, At: now, WindowSeconds: span.Seconds(), Traffic: t}
		id, prev, done := s.id, s.sent, make(chan struct{})
		s.sent = done
		h.reports.Add(1)
		go func() {
			defer h.reports.Done()
			defer close(done)
			if prev != nil {
				<-prev
			}
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			if err := h.src.Report(rctx, id, r); err != nil && ctx.Err() == nil {
				h.cfg.Log.Debug("cannot report a service's traffic", zap.String("service", id), zap.Error(err))
			}
		}()
	}
}

// Close closes every listener and waits for reports under way.
func (h *Host) Close() {
	h.mu.Lock()
	for _, s := range h.services {
		h.closeLocked(s, "the host stops")
	}
	h.mu.Unlock()
	h.reports.Wait()
}
