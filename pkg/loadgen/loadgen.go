// Package loadgen sends open-loop HTTP load to a service: requests leave
// at their arrival times whatever the answers do (Poisson arrivals at a
// rate, or a trace's arrivals), and the latencies, errors and the share
// answered within the SLO are measured per interval and in all.
package loadgen

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"refuel/pkg/traffic"
)

// Arrival is one request to send: when (from the start) and its body.
type Arrival struct {
	At   time.Duration
	Body []byte
}

// Arrivals yields arrivals in order; ok is false after the last.
type Arrivals func() (a Arrival, ok bool)

// SmallBody is the completion request sent when no trace gives one.
var SmallBody = []byte(`{"prompt":"hello","max_tokens":4}`)

// Poisson is open-loop arrivals at qps on average for span, each with body.
func Poisson(qps float64, span time.Duration, body []byte, seed uint64) Arrivals {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	var at time.Duration
	return func() (Arrival, bool) {
		if qps <= 0 {
			return Arrival{}, false
		}
		at += time.Duration(rng.ExpFloat64() / qps * float64(time.Second))
		if at >= span {
			return Arrival{}, false
		}
		return Arrival{At: at, Body: body}, true
	}
}

// Trace replays a trace's arrivals at speed (2 is twice as fast), each a
// completion request with the trace's tokens: a prompt of its context
// tokens (words) and max_tokens its generated tokens, both capped at
// maxTokens (0: uncapped).
func Trace(t *traffic.Trace, speed float64, span time.Duration, maxTokens int) Arrivals {
	i := 0
	return func() (Arrival, bool) {
		if i >= len(t.Requests) || speed <= 0 {
			return Arrival{}, false
		}
		r := t.Requests[i]
		i++
		at := time.Duration(float64(r.At) / speed)
		if span > 0 && at >= span {
			return Arrival{}, false
		}
		ctxTok, gen := r.ContextTokens, r.GeneratedTokens
		if maxTokens > 0 {
			ctxTok, gen = min(ctxTok, maxTokens), min(gen, maxTokens)
		}
		body := fmt.Appendf(nil, `{"prompt":"%s","max_tokens":%d}`, strings.TrimSpace(strings.Repeat("w ", ctxTok)), gen)
		return Arrival{At: at, Body: body}, true
	}
}

// Config is one run of load.
type Config struct {
	URL      string // where requests go, e.g. http://127.0.0.1:9000/v1/completions
	Arrivals Arrivals
	// SLO is the latency a request must be answered within to count as
	// met; 0 counts every answered request.
	SLO     time.Duration
	Timeout time.Duration // per request; default 60s
	// Every is how often OnInterval hears the latest interval; 0: never.
	Every      time.Duration
	OnInterval func(Stats)
	Client     *http.Client // default one with keep-alive connections for the load
}

// Stats are the requests finished over a span.
type Stats struct {
	Span      time.Duration
	Sent      int // requests started
	OK        int // answered 2xx, whole
	Failed    int
	WithinSLO int
	P50, P99  time.Duration // of the OK ones
	latencies []time.Duration
}

// Rate is the answered (OK or failed) requests per second.
func (s Stats) Rate() float64 {
	if s.Span <= 0 {
		return 0
	}
	return float64(s.OK+s.Failed) / s.Span.Seconds()
}

// SLOShare is the share of finished requests answered OK within the SLO
// (1 when none finished).
func (s Stats) SLOShare() float64 {
	if s.OK+s.Failed == 0 {
		return 1
	}
	return float64(s.WithinSLO) / float64(s.OK+s.Failed)
}

// Add is s and o together, as if over one span: counts and latencies
// summed, the quantiles of both.
func (s Stats) Add(o Stats) Stats {
	sum := Stats{Sent: s.Sent + o.Sent, OK: s.OK + o.OK, Failed: s.Failed + o.Failed, WithinSLO: s.WithinSLO + o.WithinSLO}
	sum.latencies = append(slices.Clone(s.latencies), o.latencies...)
	sum.seal(s.Span + o.Span)
	return sum
}

func (s *Stats) seal(span time.Duration) {
	s.Span = span
	slices.Sort(s.latencies)
	s.P50, s.P99 = quantile(s.latencies, 0.5), quantile(s.latencies, 0.99)
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// NewClient is a client for load: connections kept alive, many per host.
func NewClient(timeout time.Duration) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = 0, 4096
	return &http.Client{Transport: t, Timeout: timeout}
}

// Run sends cfg's arrivals until they end or ctx ends (then it sends no
// more and waits for the requests in flight, which ctx's end does not
// cancel), and returns the whole run's Stats.
func Run(ctx context.Context, cfg Config) Stats {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 60 * time.Second
	}
	client := cfg.Client
	if client == nil {
		client = NewClient(cfg.Timeout)
	}
	var (
		mu       sync.Mutex
		total    Stats
		interval Stats
		wg       sync.WaitGroup
	)
	start := time.Now()
	lastTick := start
	stopTicks := make(chan struct{})
	ticksDone := make(chan struct{})
	go func() {
		defer close(ticksDone)
		if cfg.Every <= 0 || cfg.OnInterval == nil {
			return
		}
		t := time.NewTicker(cfg.Every)
		defer t.Stop()
		for {
			select {
			case <-stopTicks:
				return
			case now := <-t.C:
				mu.Lock()
				s := interval
				interval = Stats{}
				span := now.Sub(lastTick)
				lastTick = now
				mu.Unlock()
				s.seal(span)
				cfg.OnInterval(s)
			}
		}
	}()
	send := func(body []byte) {
		defer wg.Done()
		begin := time.Now()
		ok := do(client, cfg.URL, body)
		took := time.Since(begin)
		mu.Lock()
		defer mu.Unlock()
		for _, s := range []*Stats{&total, &interval} {
			if !ok {
				s.Failed++
				continue
			}
			s.OK++
			s.latencies = append(s.latencies, took)
			if cfg.SLO <= 0 || took <= cfg.SLO {
				s.WithinSLO++
			}
		}
	}
	timer := time.NewTimer(0)
	<-timer.C
loop:
	for {
		a, ok := cfg.Arrivals()
		if !ok {
			break
		}
		if wait := time.Until(start.Add(a.At)); wait > 0 {
			timer.Reset(wait)
			select {
			case <-ctx.Done():
				timer.Stop()
				break loop
			case <-timer.C:
			}
		} else if ctx.Err() != nil {
			break
		}
		mu.Lock()
		total.Sent++
		interval.Sent++
		mu.Unlock()
		wg.Add(1)
		go send(a.Body)
	}
	wg.Wait()
	close(stopTicks)
	<-ticksDone
	mu.Lock()
	defer mu.Unlock()
	total.seal(time.Since(start))
	return total
}

// do sends one request and reads its whole answer; ok is a 2xx read to
// its end.
func do(c *http.Client, url string, body []byte) bool {
	resp, err := c.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return err == nil && resp.StatusCode/100 == 2
}
