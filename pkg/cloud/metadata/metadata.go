// Package metadata serves the subset of EC2's instance metadata service
// (IMDSv2) that a node agent and its trainer read: the instance's ID and
// private address (local-ipv4), the spot interruption notice and the
// rebalance recommendation; and beside it the part of Compute Engine's
// metadata server an agent reads (gce.go). Simulated clouds run one per instance so the
// agent watches notices the same way on a laptop as on EC2. A virtual
// instance's agent, which runs in the cloud's own process, reads the same
// Service through Watch instead of over HTTP: a thousand pollers of a
// thousand endpoints would cost more than the instances themselves.
package metadata

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Loopback is the private address of the simulated clouds' instances,
// processes and virtual ones alike: they all run on this machine, so their
// peers reach them there.
const Loopback = "127.0.0.1"

// Service is one instance's metadata: served on an endpoint (Start), or
// read in-process only (New).
type Service struct {
	instanceID string
	localIPv4  string
	srv        *http.Server // nil when not served
	ln         net.Listener

	mu        sync.Mutex
	zone      string // for Compute Engine's instance/zone
	tokens    map[string]time.Time
	action    *InstanceAction
	rebalance *time.Time
	// changed is closed, and replaced, whenever a notice is published.
	changed chan struct{}
}

// InstanceAction is EC2's spot/instance-action document.
type InstanceAction struct {
	Action string    `json:"action"` // "terminate" or "stop"
	Time   time.Time `json:"time"`   // when the instance will be taken
}

// New returns the metadata of one instance, not served on any endpoint:
// it is read with Watch. It holds no goroutine, listener or timer.
func New(instanceID string) *Service {
	return &Service{instanceID: instanceID, localIPv4: Loopback, tokens: map[string]time.Time{}, changed: make(chan struct{})}
}

// LocalIPv4 is the instance's private address, what local-ipv4 answers:
// Loopback.
func (s *Service) LocalIPv4() string { return s.localIPv4 }

// Start serves the metadata of one instance on a free loopback port.
func Start(instanceID string) (*Service, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := New(instanceID)
	s.ln = ln
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /latest/api/token", s.issueToken)
	mux.HandleFunc("GET /latest/meta-data/instance-id", s.authorized(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(s.instanceID))
	}))
	mux.HandleFunc("GET /latest/meta-data/local-ipv4", s.authorized(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(s.localIPv4))
	}))
	mux.HandleFunc("GET /latest/meta-data/spot/instance-action", s.authorized(s.serveAction))
	mux.HandleFunc("GET /latest/meta-data/events/recommendations/rebalance", s.authorized(s.serveRebalance))
	s.gceRoutes(mux)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// Endpoint is the base URL an IMDS client is pointed at; "" when the
// Service is not served.
func (s *Service) Endpoint() string {
	if s.ln == nil {
		return ""
	}
	return "http://" + s.ln.Addr().String()
}

// Interrupt publishes an interruption notice: the instance will be taken at t.
func (s *Service) Interrupt(action string, t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.action = &InstanceAction{Action: action, Time: t.UTC().Truncate(time.Second)}
	s.changedLocked()
}

// RecommendRebalance publishes a rebalance recommendation noticed at t.
func (s *Service) RecommendRebalance(t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t = t.UTC().Truncate(time.Second)
	s.rebalance = &t
	s.changedLocked()
}

// Watch returns what the endpoint would answer now, the interruption
// notice and the rebalance recommendation (nil when none), and a channel
// closed at the next publication: the in-process way to read them.
func (s *Service) Watch() (action *InstanceAction, rebalance *time.Time, changed <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.action, s.rebalance, s.changed
}

func (s *Service) changedLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Close stops serving, if it does.
func (s *Service) Close() error {
	if s.srv == nil {
		return nil
	}
	return s.srv.Close()
}

func (s *Service) issueToken(w http.ResponseWriter, r *http.Request) {
	ttl, err := strconv.Atoi(r.Header.Get("X-aws-ec2-metadata-token-ttl-seconds"))
	if err != nil || ttl < 1 || ttl > 21600 {
		http.Error(w, "missing or invalid X-aws-ec2-metadata-token-ttl-seconds", http.StatusBadRequest)
		return
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	tok := hex.EncodeToString(b)
	s.mu.Lock()
	s.tokens[tok] = time.Now().Add(time.Duration(ttl) * time.Second)
	s.mu.Unlock()
	w.Header().Set("X-aws-ec2-metadata-token-ttl-seconds", strconv.Itoa(ttl))
	_, _ = w.Write([]byte(tok))
}

// authorized enforces IMDSv2: every read carries a live session token.
func (s *Service) authorized(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		exp, ok := s.tokens[r.Header.Get("X-aws-ec2-metadata-token")]
		s.mu.Unlock()
		if !ok || time.Now().After(exp) {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		h(w, r)
	}
}

func (s *Service) serveAction(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	a := s.action
	s.mu.Unlock()
	if a == nil {
		http.NotFound(w, nil)
		return
	}
	writeJSON(w, struct {
		Action string `json:"action"`
		Time   string `json:"time"`
	}{a.Action, a.Time.Format(time.RFC3339)})
}

func (s *Service) serveRebalance(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	t := s.rebalance
	s.mu.Unlock()
	if t == nil {
		http.NotFound(w, nil)
		return
	}
	writeJSON(w, map[string]string{"noticeTime": t.Format(time.RFC3339)})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "text/plain")
	_ = json.NewEncoder(w).Encode(v)
}
