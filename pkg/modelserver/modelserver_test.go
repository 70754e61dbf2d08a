package modelserver

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func post(t *testing.T, url, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func TestReadyOnlyOnceWeightsLoaded(t *testing.T) {
	weights := filepath.Join(t.TempDir(), "model.bin")
	if err := os.WriteFile(weights, make([]byte, 3000), 0o600); err != nil {
		t.Fatal(err)
	}
	s := New(Config{Weights: weights, TokensPerSecond: 0})
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	for _, path := range []string{"/healthz"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("%s before load: %d, want 503", path, resp.StatusCode)
		}
	}
	if resp := post(t, srv.URL, `{}`); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("completion before load: %d", resp.StatusCode)
	}
	l, err := s.Load(context.Background())
	if err != nil || l.Bytes != 3000 {
		t.Fatalf("load: %+v, %v", l, err)
	}
	resp, err := http.Get(srv.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("healthz after load: %d", resp.StatusCode)
	}
	if _, err := New(Config{Weights: filepath.Join(t.TempDir(), "none")}).Load(context.Background()); err == nil {
		t.Fatal("a missing weights file loaded")
	}
}

func TestCompletions(t *testing.T) {
	s := New(Config{Model: "m"})
	_, _ = s.Load(context.Background())
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()

	resp := post(t, srv.URL, `{"prompt":"say two words","max_tokens":3}`)
	var c completion
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if c.Object != "text_completion" || c.Model != "m" || len(c.Choices) != 1 || c.Choices[0].Text != " tok0 tok1 tok2" ||
		c.Usage == nil || *c.Usage != (usage{PromptTokens: 3, CompletionTokens: 3, TotalTokens: 6}) {
		t.Fatalf("completion %+v", c)
	}

	resp = post(t, srv.URL, `{"prompt":"x","max_tokens":2,"stream":true}`)
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("stream content type %q", ct)
	}
	var texts []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			texts = append(texts, data)
			continue
		}
		var ev completion
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatal(err)
		}
		texts = append(texts, ev.Choices[0].Text)
	}
	if strings.Join(texts, "|") != " tok0| tok1||[DONE]" {
		t.Fatalf("stream %q", texts)
	}

	if resp := post(t, srv.URL, `{"max_tokens":-1}`); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("negative max_tokens: %d", resp.StatusCode)
	}
	if resp := post(t, srv.URL, `not json`); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("bad body: %d", resp.StatusCode)
	}
}

func TestRequestsPastTheBatchLimitWait(t *testing.T) {
	s := New(Config{Batch: 1, TokensPerSecond: 1000})
	gate := make(chan struct{})
	s.pause = func(ctx context.Context, _ time.Duration) error {
		<-gate
		return nil
	}
	_, _ = s.Load(context.Background())
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	done := make(chan string, 2)
	for range 2 {
		go func() {
			resp := post(t, srv.URL, `{"max_tokens":1}`)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			done <- string(b)
		}()
	}
	for s.Waiting() != 1 {
		time.Sleep(time.Millisecond)
	}
	gate <- struct{}{} // the first's token; the second then takes the slot
	<-done
	for s.Waiting() != 0 {
		time.Sleep(time.Millisecond)
	}
	gate <- struct{}{}
	if got := <-done; !strings.Contains(got, "tok0") {
		t.Fatalf("second answer %q", got)
	}
}

func TestMainFlags(t *testing.T) {
	for name, args := range map[string][]string{
		"no port":   {},
		"bad batch": {"--port", "0", "--batch", "0"},
		"negative":  {"--port", "0", "--tokens-per-second", "-1"},
		"bad flag":  {"--nope"},
	} {
		t.Setenv(PortEnv, "")
		var out, errb strings.Builder
		if code := Main(args, &out, &errb); code != 2 {
			t.Errorf("%s: exit %d (%s), want 2", name, code, errb.String())
		}
	}
}
