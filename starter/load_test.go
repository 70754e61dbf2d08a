package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"refuel/pkg/loadgen"
)

func TestParseLoadFlags(t *testing.T) {
	cases := map[string]struct {
		args    []string
		badFlag string
	}{
		"qps":            {args: []string{"--qps", "5"}},
		"trace":          {args: []string{"--trace", "t.csv", "--speed", "3"}},
		"neither":        {args: nil, badFlag: "qps"},
		"both":           {args: []string{"--qps", "5", "--trace", "t.csv"}, badFlag: "qps"},
		"zero qps":       {args: []string{"--qps", "0"}, badFlag: "qps"},
		"zero speed":     {args: []string{"--trace", "t.csv", "--speed", "0"}, badFlag: "speed"},
		"relative path":  {args: []string{"--qps", "1", "--path", "v1"}, badFlag: "path"},
		"body not json":  {args: []string{"--qps", "1", "--body", "{"}, badFlag: "body"},
		"negative for":   {args: []string{"--qps", "1", "--for", "-1s"}, badFlag: "for"},
		"negative every": {args: []string{"--qps", "1", "--every", "-1s"}, badFlag: "every"},
	}
	for name, tc := range cases {
		fs := pflag.NewFlagSet("load", pflag.ContinueOnError)
		f := addLoadFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		err := f.check(fs)
		var fe *FlagError
		if tc.badFlag == "" && err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if tc.badFlag != "" && (!errors.As(err, &fe) || fe.Flag != tc.badFlag || fe.Fix == "") {
			t.Errorf("%s: error %v; want a *FlagError for --%s with a fix", name, err, tc.badFlag)
		}
	}
}

func TestRunLoadSummary(t *testing.T) {
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.URL.Path != "/v1/completions" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, `{"choices":[]}`)
	}))
	defer srv.Close()
	arrivals := func() (loadgen.Arrival, bool) {
		n++
		return loadgen.Arrival{Body: loadgen.SmallBody}, n <= 5
	}
	var out bytes.Buffer
	f := loadFlags{path: "/v1/completions", asJSON: true, timeout: 1e9}
	if err := runLoad(context.Background(), "chat", strings.TrimPrefix(srv.URL, "http://"), 0, arrivals, f, &out); err != nil {
		t.Fatal(err)
	}
	var sum map[string]any
	if err := json.Unmarshal(out.Bytes(), &sum); err != nil {
		t.Fatalf("summary %q: %v", out.String(), err)
	}
	for _, k := range []string{"sent", "ok", "failed", "latency_p50_seconds", "latency_p99_seconds"} {
		if _, ok := sum[k]; !ok {
			t.Errorf("summary lacks %s: %v", k, sum)
		}
	}
	if sum["sent"] != 5.0 || sum["ok"] != 5.0 || sum["failed"] != 0.0 {
		t.Fatalf("summary %v, want 5 sent and ok", sum)
	}
}
