package telemetry

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestReadyzAnswers503NamingTheCheckThatFails(t *testing.T) {
	for name, tc := range map[string]struct {
		worker   error
		wantCode int
		want     map[string]string
	}{
		"all hold":    {wantCode: http.StatusOK, want: map[string]string{"cluster": "ok", "worker": "ok"}},
		"worker down": {worker: errors.New("no poller"), wantCode: http.StatusServiceUnavailable, want: map[string]string{"cluster": "ok", "worker": "no poller"}},
	} {
		t.Run(name, func(t *testing.T) {
			hs := Health(map[string]Check{
				"cluster": func(context.Context) error { return nil },
				"worker":  func(context.Context) error { return tc.worker },
			}, time.Second)
			rec := httptest.NewRecorder()
			hs["/readyz"].ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
			var body struct {
				OK     bool              `json:"ok"`
				Checks map[string]string `json:"checks"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatal(err)
			}
			if rec.Code != tc.wantCode || body.OK != (tc.wantCode == http.StatusOK) || len(body.Checks) != 2 ||
				body.Checks["cluster"] != tc.want["cluster"] || body.Checks["worker"] != tc.want["worker"] {
				t.Errorf("readyz: %d %+v; want %d %v", rec.Code, body, tc.wantCode, tc.want)
			}
			rec = httptest.NewRecorder()
			hs["/healthz"].ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
			if rec.Code != http.StatusOK {
				t.Errorf("healthz: %d; want 200 whatever readiness says", rec.Code)
			}
		})
	}
}
