package agent

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// GCE's metadata server: the path an instance reads its preemption at,
// the header every request must carry, and the notice a preempted
// instance gets before it is stopped.
const (
	gcePreemptedPath     = "/computeMetadata/v1/instance/preempted"
	gceMetadataFlavor    = "Metadata-Flavor"
	gcePreemptionNotice  = 30 * time.Second
	gceMetadataRetryWait = time.Second
)

// gceWatcher waits for a Compute Engine instance's preemption on its
// metadata server: a hanging GET of instance/preempted that returns when
// the value changes (wait_for_change with the last ETag seen), so the
// notice is heard the moment it is set, with no polling between. A value
// of TRUE is the notice: GCE stops the instance about 30 s later.
type gceWatcher struct {
	client *http.Client
	url    string
	// etag is the value's version last read; "" before the first read,
	// which asks for the value now rather than wait for a change.
	etag string
	// failed is set when the last request failed: the next waits
	// gceMetadataRetryWait first, so a server away is not hammered.
	failed bool
	now    func() time.Time
}

// newGCEWatcher watches the metadata server at host (host:port, as
// GCE_METADATA_HOST gives it, or a URL).
func newGCEWatcher(host string) *gceWatcher {
	base := strings.TrimSuffix(host, "/")
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	return &gceWatcher{client: &http.Client{}, url: base + gcePreemptedPath, now: time.Now}
}

func (w *gceWatcher) read(ctx context.Context) (*Notice, *Notice) {
	q := url.Values{}
	if w.etag != "" {
		q.Set("wait_for_change", "true")
		q.Set("last_etag", w.etag)
	}
	u := w.url
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		w.failed = true
		return nil, nil
	}
	req.Header.Set(gceMetadataFlavor, "Google")
	resp, err := w.client.Do(req)
	if err != nil {
		w.failed = true
		return nil, nil
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64))
	if err != nil || resp.StatusCode != http.StatusOK {
		w.failed = true
		return nil, nil
	}
	w.failed = false
	w.etag = resp.Header.Get("ETag")
	if strings.EqualFold(strings.TrimSpace(string(body)), "TRUE") {
		return &Notice{Action: "terminate", Time: w.now().Add(gcePreemptionNotice).UTC().Truncate(time.Second)}, nil
	}
	if w.etag == "" {
		// A server that gives no ETag cannot be waited on: ask again
		// after a pause, as after a failure.
		w.failed = true
	}
	return nil, nil
}

// wait returns at once after a good read (the next read hangs until the
// value changes), and after a pause after a failed one.
func (w *gceWatcher) wait(ctx context.Context) bool {
	if !w.failed {
		return ctx.Err() == nil
	}
	t := time.NewTimer(gceMetadataRetryWait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
