package metadata

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The part of Compute Engine's metadata server a node agent reads, served
// beside the EC2 paths on the same endpoint: instance/preempted (FALSE,
// TRUE once a notice is out; ?wait_for_change=true hangs until it
// changes), instance/id, instance/name and instance/zone. Every request
// must carry Metadata-Flavor: Google, as on GCE. An agent's client finds
// it through GCE_METADATA_HOST, the endpoint's host:port.

// EnvGCEMetadataHost is the variable Google's clients read the metadata
// server's host:port from.
const EnvGCEMetadataHost = "GCE_METADATA_HOST"

// GCEProjectNumber is the project number the simulated instances' zones
// are given in (instance/zone is projects/NUMBER/zones/ZONE).
const GCEProjectNumber = "123456789012"

// GCEInstanceID is the numeric ID Compute Engine would give an instance
// of this name: stable, so the sim's API and its metadata server agree.
func GCEInstanceID(name string) uint64 {
	sum := sha256.Sum256([]byte(name))
	return binary.BigEndian.Uint64(sum[:8]) >> 1 // positive in an int64 too
}

// SetZone says which zone the instance is in, for instance/zone.
func (s *Service) SetZone(zone string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.zone = zone
}

// HostPort is the endpoint as GCE_METADATA_HOST wants it: host:port,
// without a scheme; "" when the Service is not served.
func (s *Service) HostPort() string {
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

func (s *Service) gceRoutes(mux *http.ServeMux) {
	const base = "GET /computeMetadata/v1/instance/"
	mux.HandleFunc(base+"preempted", s.google(s.servePreempted))
	mux.HandleFunc(base+"id", s.google(func(w http.ResponseWriter, _ *http.Request) {
		writeText(w, strconv.FormatUint(GCEInstanceID(s.instanceID), 10))
	}))
	mux.HandleFunc(base+"name", s.google(func(w http.ResponseWriter, _ *http.Request) { writeText(w, s.instanceID) }))
	mux.HandleFunc(base+"hostname", s.google(func(w http.ResponseWriter, _ *http.Request) { writeText(w, s.instanceID) }))
	mux.HandleFunc(base+"zone", s.google(func(w http.ResponseWriter, _ *http.Request) {
		s.mu.Lock()
		zone := s.zone
		s.mu.Unlock()
		writeText(w, "projects/"+GCEProjectNumber+"/zones/"+zone)
	}))
	mux.HandleFunc(base+"network-interfaces/0/ip", s.google(func(w http.ResponseWriter, _ *http.Request) { writeText(w, s.localIPv4) }))
}

// google enforces what Compute Engine's metadata server does: a request
// without Metadata-Flavor: Google is refused, and every answer says it.
func (s *Service) google(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Metadata-Flavor", "Google")
		if r.Header.Get("Metadata-Flavor") != "Google" {
			http.Error(w, "Missing Metadata-Flavor:Google header.", http.StatusForbidden)
			return
		}
		h(w, r)
	}
}

// servePreempted answers instance/preempted. With wait_for_change=true it
// hangs until the value differs from last_etag's (or from now's, without
// one), until timeout_sec passes, or until the client goes away.
func (s *Service) servePreempted(w http.ResponseWriter, r *http.Request) {
	value := func() (string, <-chan struct{}) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.action != nil {
			return "TRUE", s.changed
		}
		return "FALSE", s.changed
	}
	v, changed := value()
	if r.URL.Query().Get("wait_for_change") == "true" {
		last := r.URL.Query().Get("last_etag")
		if last == "" {
			last = etag(v)
		}
		ctx := r.Context()
		if sec, err := strconv.Atoi(r.URL.Query().Get("timeout_sec")); err == nil && sec > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, time.Duration(sec)*time.Second)
			defer cancel()
		}
		for etag(v) == last {
			select {
			case <-changed:
			case <-ctx.Done():
				if r.Context().Err() != nil {
					return
				}
				w.Header().Set("ETag", etag(v))
				writeText(w, v)
				return
			}
			v, changed = value()
		}
	}
	w.Header().Set("ETag", etag(v))
	writeText(w, v)
}

func etag(v string) string {
	sum := sha256.Sum256([]byte(v))
	return hex.EncodeToString(sum[:8])
}

func writeText(w http.ResponseWriter, v string) {
	w.Header().Set("Content-Type", "application/text")
	_, _ = w.Write([]byte(strings.TrimSpace(v)))
}
