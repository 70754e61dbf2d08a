// Package balancer is one inference service's load balancer: it routes each
// request to the ready replica with the fewest requests in flight, holds
// requests past max_concurrency in a FIFO queue, passes streams through
// unbuffered, retries a request whose replica failed before answering once
// on another replica, and measures the service's traffic. It holds no state
// of its own about the service: Update hands it the replica set and settings
// read from the service's status, as often as they are read.
package balancer

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"refuel/pkg/serving"
)

// Defaults for settings a status leaves at zero.
const (
	DefaultMaxConcurrency = 16
	DefaultQueueTimeout   = 30 * time.Second
)

// suspectFor is how long a replica that refused a connection takes no new
// requests, unless the service's status says otherwise first: its status
// lags the loss by up to a probe period.
const suspectFor = 2 * time.Second

// replica is one replica as routed to. Its object outlives its membership
// while requests it holds are in flight, so their ends decrement the count
// they incremented, whatever the set became meanwhile.
type replica struct {
	id       string
	endpoint string
	target   *url.URL
	state    string
	member   bool // in the latest set
	inFlight int
	suspect  time.Time // takes nothing new before this
}

// waiter is a request in the queue; ready receives the replica it is to be
// sent to, with its count already taken.
type waiter struct {
	exclude *replica // the replica a retry must not go to
	ready   chan *replica
}

// Balancer is one service's balancer. Its zero value is not usable: use New.
type Balancer struct {
	service   string
	transport http.RoundTripper
	metrics   *Metrics // nil: no Prometheus
	now       func() time.Time

	mu       sync.Mutex
	replicas map[string]*replica // members, and former members with requests in flight
	order    []*replica          // members in the set's order: ties go to the first
	settings serving.Settings
	queue    []*waiter
	window   window
	// held is the requests the replicas hold, all together: those of a
	// replica replaced under its id too, whose object the set no longer
	// names.
	held int
	// handling counts the requests from their arrival until they are
	// counted in the window, answered or not (see Handling); atomic, off
	// the lock the routing takes.
	handling atomic.Int64
}

// New is the balancer of service; transport carries requests to replicas
// (nil: a transport tuned for many short requests to few hosts); metrics may
// be nil.
func New(service string, transport http.RoundTripper, metrics *Metrics) *Balancer {
	if transport == nil {
		transport = NewTransport()
	}
	b := &Balancer{service: service, transport: transport, metrics: metrics, now: time.Now, replicas: map[string]*replica{}}
	b.window.start = b.now()
	b.window.tallied = b.window.start
	return b
}

// NewTransport is a transport for a balancer: keep-alive connections to
// each replica, enough of them idle for a replica's whole concurrency.
func NewTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 0
	t.MaxIdleConnsPerHost = 1024
	t.ForceAttemptHTTP2 = false
	return t
}

// Update replaces the replica set and settings. Replicas keep their counts
// across updates while their id and endpoint stay; a replica that left keeps
// counting down the requests it holds; queued requests go to replicas that
// can now take them.
func (b *Balancer) Update(set []serving.Replica, s serving.Settings) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.settings = s
	for _, r := range b.order {
		r.member = false
	}
	b.order = b.order[:0]
	for _, sr := range set {
		if sr.Endpoint == "" {
			continue
		}
		r := b.replicas[sr.ID]
		if r == nil || r.endpoint != sr.Endpoint {
			target, err := url.Parse("http://" + sr.Endpoint)
			if err != nil || target.Host == "" {
				continue
			}
			r = &replica{id: sr.ID, endpoint: sr.Endpoint, target: target}
			b.replicas[sr.ID] = r
		}
		if r.member {
			continue // a repeated id: the first stands
		}
		if r.state != sr.State {
			r.suspect = time.Time{} // the status has caught up with it
		}
		r.state, r.member = sr.State, true
		b.order = append(b.order, r)
	}
	for id, r := range b.replicas {
		if !r.member && r.inFlight == 0 {
			delete(b.replicas, id)
		}
	}
	b.metrics.replicasReady(b.service, b.readyLocked())
	b.dispatchLocked()
}

// readyLocked counts the replicas that take new requests.
func (b *Balancer) readyLocked() int {
	n := 0
	now := b.now()
	for _, r := range b.order {
		if r.takesNew(now) {
			n++
		}
	}
	return n
}

// ready reports whether the status says r takes new requests.
func (r *replica) ready() bool { return r.member && r.state == serving.ReplicaReady }

func (r *replica) takesNew(now time.Time) bool { return r.ready() && !now.Before(r.suspect) }

func (b *Balancer) maxConcurrency() int {
	if b.settings.MaxConcurrency > 0 {
		return b.settings.MaxConcurrency
	}
	return DefaultMaxConcurrency
}

func (b *Balancer) queueTimeout() time.Duration {
	if b.settings.QueueTimeoutSeconds > 0 {
		return time.Duration(b.settings.QueueTimeoutSeconds * float64(time.Second))
	}
	return DefaultQueueTimeout
}

// pickLocked is the ready replica with the fewest in flight and room for
// one more, other than exclude; nil when none has room. Suspects are passed
// over while another ready replica exists: with none, trying one beats
// waiting.
func (b *Balancer) pickLocked(exclude *replica) *replica {
	var best *replica
	limit := b.maxConcurrency()
	now := b.now()
	trusted := false
	for _, r := range b.order {
		if r == exclude || !r.ready() {
			continue
		}
		ok := !now.Before(r.suspect)
		if ok && !trusted {
			trusted, best = true, nil // suspects picked so far give way
		}
		if (trusted && !ok) || r.inFlight >= limit {
			continue
		}
		if best == nil || r.inFlight < best.inFlight {
			best = r
		}
	}
	return best
}

// anyOtherLocked reports whether a replica other than exclude may take
// requests at all, now or once it has room.
func (b *Balancer) anyOtherLocked(exclude *replica) bool {
	return slices.ContainsFunc(b.order, func(r *replica) bool { return r != exclude && r.ready() })
}

// dispatchLocked hands replicas with room to queued requests, first come
// first served (a retry skips a replica it must not go to).
func (b *Balancer) dispatchLocked() {
	for i := 0; i < len(b.queue); {
		w := b.queue[i]
		r := b.pickLocked(w.exclude)
		if r == nil {
			if b.pickLocked(nil) == nil {
				return // no room anywhere
			}
			i++
			continue
		}
		r.inFlight++
		b.holdLocked(1)
		b.queue = slices.Delete(b.queue, i, i+1)
		w.ready <- r
	}
}

// errQueueTimeout and errNoReplica say why acquire gave no replica.
var (
	errQueueTimeout = errors.New("queue timeout")
	errNoReplica    = errors.New("no other replica")
)

// acquire takes a count on a replica other than exclude, waiting in the
// queue while none has room; it gives up when done closes (the client went
// away) or past the queue timeout.
func (b *Balancer) acquire(done <-chan struct{}, exclude *replica) (*replica, error) {
	b.mu.Lock()
	if exclude != nil && !b.anyOtherLocked(exclude) {
		b.mu.Unlock()
		return nil, errNoReplica
	}
	if len(b.queue) == 0 || exclude != nil {
		if r := b.pickLocked(exclude); r != nil {
			r.inFlight++
			b.holdLocked(1)
			b.mu.Unlock()
			return r, nil
		}
	}
	w := &waiter{exclude: exclude, ready: make(chan *replica, 1)}
	b.queue = append(b.queue, w)
	timeout := b.queueTimeout()
	b.mu.Unlock()

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var why error
	select {
	case r := <-w.ready:
		return r, nil
	case <-timer.C:
		why = errQueueTimeout
	case <-done:
		why = errCanceled
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if i := slices.Index(b.queue, w); i >= 0 {
		b.queue = slices.Delete(b.queue, i, i+1)
		return nil, why
	}
	// Handed a replica as it gave up: give the count back.
	b.releaseLocked(<-w.ready)
	return nil, why
}

// release gives back a count acquire took.
func (b *Balancer) release(r *replica) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.releaseLocked(r)
}

func (b *Balancer) releaseLocked(r *replica) {
	r.inFlight--
	b.holdLocked(-1)
	if r.inFlight < 0 {
		panic("balancer: in-flight count below zero for replica " + r.id)
	}
	if !r.member && r.inFlight == 0 && b.replicas[r.id] == r {
		delete(b.replicas, r.id)
	}
	b.dispatchLocked()
}

// markSuspect keeps new requests off a replica that refused a connection
// until its status says more or suspectFor passes.
func (b *Balancer) markSuspect(r *replica) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r.suspect = b.now().Add(suspectFor)
	b.metrics.replicasReady(b.service, b.readyLocked())
}

// InFlight is the number of requests held by each replica still counted
// (members, and former members with requests in flight), by id.
func (b *Balancer) InFlight() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	m := make(map[string]int, len(b.replicas))
	for id, r := range b.replicas {
		m[id] = r.inFlight
	}
	return m
}

// Handling is the number of requests the balancer has not finished
// with: in flight, queued, or answered but not yet counted in its
// traffic. A caller that saw its answer waits for 0 to read a report
// that counts it.
func (b *Balancer) Handling() int { return int(b.handling.Load()) }

// Queued is the number of requests waiting for a replica.
func (b *Balancer) Queued() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue)
}

// retryAfter is the Retry-After a 503 carries: the queue timeout in whole
// seconds, at least 1.
func (b *Balancer) retryAfter() string {
	b.mu.Lock()
	s := int(b.queueTimeout().Round(time.Second) / time.Second)
	b.mu.Unlock()
	return strconv.Itoa(max(s, 1))
}
