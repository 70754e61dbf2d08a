package telemetry

import (
	"context"
	"encoding/json"
	"net/http"
	"time"
)

// Check is one readiness condition: nil when it holds, otherwise what is
// wrong, in words an operator can act on.
type Check func(ctx context.Context) error

// Health serves /healthz (the process is up and serving HTTP) and
// /readyz (every check holds), for container healthchecks, Kubernetes
// probes and load balancers. Each answers JSON: {"ok": bool, "checks":
// {name: "ok" or the problem}}, with 200 or 503.
func Health(checks map[string]Check, timeout time.Duration) map[string]http.Handler {
	live := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeHealth(w, true, map[string]string{"process": "ok"})
	})
	ready := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		ok, out := true, map[string]string{}
		for name, check := range checks {
			out[name] = "ok"
			if err := check(ctx); err != nil {
				ok, out[name] = false, err.Error()
			}
		}
		writeHealth(w, ok, out)
	})
	return map[string]http.Handler{"/healthz": live, "/readyz": ready}
}

func writeHealth(w http.ResponseWriter, ok bool, checks map[string]string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"ok": ok, "checks": checks})
}
