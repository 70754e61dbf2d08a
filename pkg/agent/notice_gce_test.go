package agent

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeGCEMetadata is a Compute Engine metadata server's instance/preempted:
// it answers only requests that carry Metadata-Flavor: Google, and holds a
// wait_for_change request whose last_etag is current until the value
// changes, as GCE's does.
type fakeGCEMetadata struct {
	mu        sync.Mutex
	preempted bool
	version   int
	changed   chan struct{}
	// fail answers that many requests with 503 first.
	fail int
	// requests counts the requests by their query, without the ETag.
	requests map[string]int
}

func newFakeGCEMetadata() *fakeGCEMetadata {
	return &fakeGCEMetadata{changed: make(chan struct{}), requests: map[string]int{}}
}

func (f *fakeGCEMetadata) preempt() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.preempted = true
	f.version++
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *fakeGCEMetadata) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != gcePreemptedPath {
		http.NotFound(w, r)
		return
	}
	if r.Header.Get("Metadata-Flavor") != "Google" {
		http.Error(w, "Missing Metadata-Flavor:Google header.", http.StatusForbidden)
		return
	}
	f.mu.Lock()
	f.requests["wait_for_change="+r.URL.Query().Get("wait_for_change")]++
	if f.fail > 0 {
		f.fail--
		f.mu.Unlock()
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
		return
	}
	etag := strconv.Itoa(f.version)
	changed := f.changed
	f.mu.Unlock()
	if r.URL.Query().Get("wait_for_change") == "true" && r.URL.Query().Get("last_etag") == etag {
		select {
		case <-changed:
		case <-r.Context().Done():
			return
		}
	}
	f.mu.Lock()
	v, etag := f.preempted, strconv.Itoa(f.version)
	f.mu.Unlock()
	w.Header().Set("ETag", etag)
	fmt.Fprint(w, strings.ToUpper(strconv.FormatBool(v)))
}

func TestGCEWatcherHearsThePreemption(t *testing.T) {
	for name, tc := range map[string]struct {
		already bool // preempted before the watch starts
		fail    int  // requests the server refuses first
	}{
		"set while watching":       {},
		"set before the watch":     {already: true},
		"server away for a moment": {fail: 2},
	} {
		t.Run(name, func(t *testing.T) {
			md := newFakeGCEMetadata()
			md.fail = tc.fail
			if tc.already {
				md.preempt()
			}
			srv := httptest.NewServer(md)
			defer srv.Close()
			w := newGCEWatcher(strings.TrimPrefix(srv.URL, "http://"))
			at := time.Date(2026, 12, 5, 4, 0, 0, 0, time.UTC)
			w.now = func() time.Time { return at }
			ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
			defer cancel()
			notices := make(chan Notice, 1)
			go watch(ctx, w, notices, func(Notice) { t.Error("GCE has no rebalance recommendation") })
			if !tc.already {
				// The watch hangs on wait_for_change once it has read
				// FALSE; only then is the preemption set.
				for {
					md.mu.Lock()
					waiting := md.requests["wait_for_change=true"] > 0
					md.mu.Unlock()
					if waiting || ctx.Err() != nil {
						break
					}
					time.Sleep(5 * time.Millisecond)
				}
				md.preempt()
			}
			select {
			case n := <-notices:
				if want := (Notice{Action: "terminate", Time: at.Add(30 * time.Second)}); n != want {
					t.Errorf("notice %+v, want %+v", n, want)
				}
			case <-ctx.Done():
				t.Fatal("no notice heard")
			}
			md.mu.Lock()
			defer md.mu.Unlock()
			if !tc.already && md.requests["wait_for_change=true"] > 1 {
				t.Errorf("requests %v: the watch polled instead of hanging on one request", md.requests)
			}
		})
	}
}

func TestRunPreemptedByGCEPreemption(t *testing.T) {
	h := newHarness(t)
	md := newFakeGCEMetadata()
	srv := httptest.NewServer(md)
	defer srv.Close()
	cfg := h.config("wait")
	cfg.GCEMetadataHost = strings.TrimPrefix(srv.URL, "http://")
	cfg.UploadMargin = 5 * time.Second
	wait := h.run(context.Background(), cfg)

	h.events.waitFor(t, EventCheckpoint, 1)
	md.preempt()
	res, err := wait()
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.Outcome != Preempted || res.Killed {
		t.Errorf("outcome %s killed %v, want preempted by SIGTERM alone", res.Outcome, res.Killed)
	}
	if res.Notice == nil || res.Notice.Action != "terminate" {
		t.Errorf("notice %+v, want GCE's preemption as a terminate notice", res.Notice)
	}
	if res.LastCheckpoint == nil || res.LastCheckpoint.Step != 2 {
		t.Errorf("last checkpoint %+v, want the final one, step 2", res.LastCheckpoint)
	}
}
