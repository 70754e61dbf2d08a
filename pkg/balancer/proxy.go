package balancer

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
)

// maxRetryBody is the largest request body kept for a retry; a larger one
// is streamed to its replica and not retried.
const maxRetryBody = 1 << 20

// errCanceled says the client went away.
var errCanceled = errors.New("client went away")

// Outcomes of a request, as counted and exported.
const (
	OutcomeOK           = "ok"            // the replica answered below 500
	OutcomeReplicaError = "replica_error" // the replica answered 5xx, or broke off its answer
	OutcomeUnreachable  = "unreachable"   // no replica answered, retry included: 502
	OutcomeQueueTimeout = "queue_timeout" // waited past queue_timeout: 503
	OutcomeCanceled     = "canceled"      // the client went away first (not an error)
)

// outcomeBrokenOff is OutcomeReplicaError where the answer had begun.
const outcomeBrokenOff = OutcomeReplicaError + "/broken-off"

// hopHeaders belong to one connection and are not passed on.
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// ServeHTTP routes one request.
func (b *Balancer) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b.handling.Add(1)
	defer b.handling.Add(-1)
	start := b.now()
	outcome, brokenOff := b.serve(w, req)
	if brokenOff {
		outcome = OutcomeReplicaError
	}
	b.record(outcome, b.now().Sub(start))
	if brokenOff {
		// The status line is sent: cut the connection so the client sees
		// the answer is incomplete.
		panic(http.ErrAbortHandler)
	}
}

// serve routes req and says how it ended; brokenOff is true when its
// replica broke off an answer already begun.
func (b *Balancer) serve(w http.ResponseWriter, req *http.Request) (outcome string, brokenOff bool) {
	body, retryable, err := readBody(req)
	if err != nil {
		return OutcomeCanceled, false
	}
	var failed *replica
	for {
		r, err := b.acquire(req.Context().Done(), failed)
		switch {
		case errors.Is(err, errCanceled):
			return OutcomeCanceled, false
		case errors.Is(err, errQueueTimeout):
			w.Header().Set("Retry-After", b.retryAfter())
			http.Error(w, "every replica of the service is busy: retry later", http.StatusServiceUnavailable)
			return OutcomeQueueTimeout, false
		case err != nil:
			http.Error(w, "the service's replica failed and no other replica takes requests", http.StatusBadGateway)
			return OutcomeUnreachable, false
		}
		outcome, again := b.forward(w, req, r, body)
		b.release(r)
		if !again {
			return outcome, outcome == outcomeBrokenOff
		}
		if failed != nil || !retryable {
			http.Error(w, "the service's replicas failed before answering", http.StatusBadGateway)
			return OutcomeUnreachable, false
		}
		failed = r
	}
}

// readBody keeps a body of up to maxRetryBody in memory so that it can be
// sent again; a larger one is left to stream (retryable false).
func readBody(req *http.Request) (body []byte, retryable bool, err error) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, true, nil
	}
	if req.ContentLength > maxRetryBody {
		return nil, false, nil
	}
	buf, err := io.ReadAll(io.LimitReader(req.Body, maxRetryBody+1))
	if err != nil {
		return nil, false, err
	}
	if len(buf) > maxRetryBody {
		req.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(buf), req.Body), req.Body}
		return nil, false, nil
	}
	return buf, true, nil
}

// forward sends req to r and copies the answer back, flushing each write
// so that streams pass unbuffered. again is true when r failed before any
// byte of an answer: the request may go elsewhere.
func (b *Balancer) forward(w http.ResponseWriter, req *http.Request, r *replica, body []byte) (outcome string, again bool) {
	ctx := req.Context()
	out := req.Clone(ctx)
	out.RequestURI = ""
	out.URL.Scheme, out.URL.Host = r.target.Scheme, r.target.Host
	out.Host = r.target.Host
	out.Close = false
	if body != nil {
		out.Body, out.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	} else if req.Body == nil || req.Body == http.NoBody {
		out.Body, out.ContentLength = nil, 0
	}
	removeHopHeaders(out.Header)
	if ip, _, err := net.SplitHostPort(req.RemoteAddr); err == nil {
		if prior := req.Header.Get("X-Forwarded-For"); prior != "" {
			ip = prior + ", " + ip
		}
		out.Header.Set("X-Forwarded-For", ip)
	}
	resp, err := b.transport.RoundTrip(out)
	if err != nil {
		if ctx.Err() != nil {
			return OutcomeCanceled, false
		}
		b.markSuspect(r)
		return OutcomeReplicaError, true
	}
	defer resp.Body.Close()
	h := w.Header()
	for k, v := range resp.Header {
		h[k] = v
	}
	removeHopHeaders(h)
	w.WriteHeader(resp.StatusCode)
	outcome = OutcomeOK
	if resp.StatusCode >= 500 {
		outcome = OutcomeReplicaError
	}
	if err := copyFlushing(w, resp.Body); err != nil {
		if ctx.Err() != nil || errors.Is(err, context.Canceled) {
			return OutcomeCanceled, false
		}
		return outcomeBrokenOff, false
	}
	return outcome, false
}

// copyFlushing copies src to w, flushing after every write; an error
// writing to the client is reported as context.Canceled.
func copyFlushing(w http.ResponseWriter, src io.Reader) error {
	flusher, _ := w.(http.Flusher)
	bp := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(bp)
	buf := *bp
	for {
		n, rerr := src.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return context.Canceled
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}

func removeHopHeaders(h http.Header) {
	if c := h.Get("Connection"); c != "" {
		for _, name := range strings.Split(c, ",") {
			h.Del(strings.TrimSpace(name))
		}
	}
	for _, name := range hopHeaders {
		h.Del(name)
	}
}
