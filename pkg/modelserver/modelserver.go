// Package modelserver is the demo model server a service's replicas run
// (`worker model-server`): it loads a weights file at start, so its load
// time grows with the file, answers /healthz with 2xx only once loaded, and
// serves an OpenAI-compatible POST /v1/completions whose tokens come at a
// set rate, streamed as server-sent events when asked. Past its batch limit
// requests wait their turn.
package modelserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// Config is what a model server serves, and how fast.
type Config struct {
	Model           string        // the name answers carry
	Weights         string        // file read whole at start ("" for none)
	LoadDelay       time.Duration // added to the weights' load, as a bigger model would take
	TokensPerSecond float64       // pace of each request's tokens; 0: as fast as possible
	Batch           int           // requests generated at once; more wait
	MaxTokens       int           // a request's max_tokens when it gives none
}

// Server is one model server. Use New, then Load; Handler serves at once
// (answering 503 until loaded).
type Server struct {
	cfg     Config
	loaded  atomic.Bool
	slots   chan struct{}
	waiting atomic.Int64
	serial  atomic.Int64
	// pause waits between two tokens; tests replace it.
	pause func(ctx context.Context, d time.Duration) error
}

// New is a server of cfg, not loaded yet.
func New(cfg Config) *Server {
	if cfg.Batch <= 0 {
		cfg.Batch = 8
	}
	if cfg.MaxTokens <= 0 {
		cfg.MaxTokens = 16
	}
	if cfg.Model == "" {
		cfg.Model = "refuel-demo"
	}
	return &Server{cfg: cfg, slots: make(chan struct{}, cfg.Batch), pause: sleep}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Loaded is what Load read.
type Loaded struct {
	Bytes  int64
	SHA256 string
	Took   time.Duration
}

// Load reads the weights file whole and waits out the load delay; after
// it, /healthz answers 200.
func (s *Server) Load(ctx context.Context) (Loaded, error) {
	start := time.Now()
	var l Loaded
	if s.cfg.Weights != "" {
		f, err := os.Open(s.cfg.Weights)
		if err != nil {
			return l, fmt.Errorf("weights: %w", err)
		}
		h := sha256.New()
		n, err := io.Copy(h, f)
		f.Close()
		if err != nil {
			return l, fmt.Errorf("weights %s: %w", s.cfg.Weights, err)
		}
		l.Bytes, l.SHA256 = n, hex.EncodeToString(h.Sum(nil))
	}
	if s.cfg.LoadDelay > 0 {
		if err := sleep(ctx, s.cfg.LoadDelay); err != nil {
			return l, err
		}
	}
	l.Took = time.Since(start)
	s.loaded.Store(true)
	return l, nil
}

// Waiting is the number of requests waiting for a batch slot.
func (s *Server) Waiting() int { return int(s.waiting.Load()) }

// Handler serves /healthz and /v1/completions.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		if !s.loaded.Load() {
			http.Error(w, "loading weights", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("POST /v1/completions", s.complete)
	return mux
}

// completionRequest is the part of OpenAI's completion request the demo
// reads.
type completionRequest struct {
	Model     string          `json:"model"`
	Prompt    json.RawMessage `json:"prompt"`
	MaxTokens *int            `json:"max_tokens"`
	Stream    bool            `json:"stream"`
}

type choice struct {
	Text         string  `json:"text"`
	Index        int     `json:"index"`
	FinishReason *string `json:"finish_reason"`
}

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

type completion struct {
	ID      string   `json:"id"`
	Object  string   `json:"object"`
	Created int64    `json:"created"`
	Model   string   `json:"model"`
	Choices []choice `json:"choices"`
	Usage   *usage   `json:"usage,omitempty"`
}

func (s *Server) complete(w http.ResponseWriter, r *http.Request) {
	if !s.loaded.Load() {
		http.Error(w, "loading weights", http.StatusServiceUnavailable)
		return
	}
	var req completionRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil && err != io.EOF {
		http.Error(w, "the body is not a completion request (JSON): "+err.Error(), http.StatusBadRequest)
		return
	}
	n := s.cfg.MaxTokens
	if req.MaxTokens != nil {
		if *req.MaxTokens < 0 {
			http.Error(w, "max_tokens is negative: give 0 or more", http.StatusBadRequest)
			return
		}
		n = *req.MaxTokens
	}
	ctx := r.Context()
	s.waiting.Add(1)
	select {
	case s.slots <- struct{}{}:
		s.waiting.Add(-1)
	case <-ctx.Done():
		s.waiting.Add(-1)
		return
	}
	defer func() { <-s.slots }()

	c := completion{ID: fmt.Sprintf("cmpl-%d", s.serial.Add(1)), Object: "text_completion", Created: time.Now().Unix(), Model: s.cfg.Model}
	var gap time.Duration
	if s.cfg.TokensPerSecond > 0 {
		gap = time.Duration(float64(time.Second) / s.cfg.TokensPerSecond)
	}
	prompt := promptTokens(req.Prompt)
	if !req.Stream {
		var text strings.Builder
		for i := range n {
			if gap > 0 && s.pause(ctx, gap) != nil {
				return
			}
			text.WriteString(token(i))
		}
		stop := "length"
		c.Choices = []choice{{Text: text.String(), FinishReason: &stop}}
		c.Usage = &usage{PromptTokens: prompt, CompletionTokens: n, TotalTokens: prompt + n}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(c)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	flusher, _ := w.(http.Flusher)
	send := func(v any) bool {
		b, _ := json.Marshal(v)
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return false
		}
		if flusher != nil {
			flusher.Flush()
		}
		return true
	}
	for i := range n {
		if gap > 0 && s.pause(ctx, gap) != nil {
			return
		}
		c.Choices = []choice{{Text: token(i)}}
		if !send(c) {
			return
		}
	}
	stop := "length"
	c.Choices = []choice{{FinishReason: &stop}}
	c.Usage = &usage{PromptTokens: prompt, CompletionTokens: n, TotalTokens: prompt + n}
	if send(c) {
		fmt.Fprint(w, "data: [DONE]\n\n")
	}
}

// token is the demo's i-th generated token.
func token(i int) string { return fmt.Sprintf(" tok%d", i) }

// promptTokens counts a prompt's words, as the demo's tokens.
func promptTokens(raw json.RawMessage) int {
	var p string
	if json.Unmarshal(raw, &p) != nil {
		var ps []string
		_ = json.Unmarshal(raw, &ps)
		p = strings.Join(ps, " ")
	}
	return len(strings.Fields(p))
}
