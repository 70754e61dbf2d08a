package agent

import (
	"context"
	"net/http"

	"refuel/pkg/devenv"
	"time"
)

// Readiness makes a development-environment-shaped Run a service
// replica's (Dev.Ready): the command is a model server. Its workspace is
// scratch, never saved nor restored; the endpoint is ready at the first
// 2xx answer to an HTTP GET of Path, tried every Period with Timeout
// each; a server that has not answered by InitialDelay plus one Period
// and one Timeout (the grace, so the probe due at InitialDelay counts)
// is stopped as never ready, and the Run fails with its last lines.
type Readiness struct {
	Path         string
	InitialDelay time.Duration
	Period       time.Duration
	Timeout      time.Duration
}

// readyBy is how long after its start the server must have answered.
func (p Readiness) readyBy() time.Duration { return p.InitialDelay + p.Period + p.Timeout }

// probeReady tries the server until it answers 2xx, then reports it
// serving with its load time; or, past readyBy, says it never got ready
// and closes d.neverReady, which stops the command. It returns when
// either happens or ctx ends.
func (d *devSession) probeReady(ctx context.Context) {
	p := *d.cfg.Ready
	client := &http.Client{Timeout: p.Timeout}
	url := "http://" + d.endpoint + p.Path
	deadline := time.NewTimer(p.readyBy())
	defer deadline.Stop()
	tick := time.NewTicker(p.Period)
	defer tick.Stop()
	for {
		if d.answers2xx(ctx, client, url) {
			now := time.Now()
			d.mu.Lock()
			d.served, d.readyAt = true, now
			d.mu.Unlock()
			d.r.say("the model server answers GET %s: ready %s after it started", p.Path, now.Sub(d.started).Round(time.Millisecond))
			d.r.emit(Event{Kind: EventServing, Dev: d.report(devenv.Sample{})})
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-deadline.C:
			d.r.say("the model server did not answer GET %s with 2xx within %s (initial_delay %s and a period and a timeout of grace): stopping it as never ready",
				p.Path, p.readyBy(), p.InitialDelay)
			close(d.neverReady)
			return
		case <-tick.C:
		}
	}
}

// answers2xx reports whether one GET of url answers 2xx.
func (d *devSession) answers2xx(ctx context.Context, client *http.Client, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode >= 200 && resp.StatusCode < 300
}

// notReady is closed when a model server never got ready; nil (never
// ready to receive) for any other Run.
func (d *devSession) notReady() <-chan struct{} {
	if d == nil {
		return nil
	}
	return d.neverReady
}

// serves reports whether the Run is a service replica's.
func (d *devSession) serves() bool { return d != nil && d.cfg.Ready != nil }
