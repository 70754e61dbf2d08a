package nodeagent

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestNodeGPUs(t *testing.T) {
	cases := map[string]struct {
		status int
		body   string
		want   int
		err    string
	}{
		"eight":        {http.StatusOK, `{"status":{"allocatable":{"cpu":"96","nvidia.com/gpu":"8"}}}`, 8, ""},
		"no plugin":    {http.StatusOK, `{"status":{"allocatable":{"cpu":"96"}}}`, 0, "device plugin"},
		"forbidden":    {http.StatusForbidden, `{}`, 0, "get on nodes"},
		"not a number": {http.StatusOK, `{"status":{"allocatable":{"nvidia.com/gpu":"8k"}}}`, 0, "not a count"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/api/v1/nodes/gpu-node-01" || r.Header.Get("Authorization") != "Bearer tok" {
					http.Error(w, "unexpected "+r.URL.Path, http.StatusBadRequest)
					return
				}
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			got, err := kubeAPI{base: srv.URL, token: "tok", client: srv.Client()}.nodeGPUs(context.Background(), "gpu-node-01")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v; want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("got %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}
