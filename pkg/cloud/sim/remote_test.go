package sim

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"refuel/pkg/capacity"
)

// A control plane on the AWS provider against a sim in another process
// serves notices through the sim's controls: a known instance gets one,
// an unknown one is not found, and a wrong token says what to give.
func TestRemoteInterrupts(t *testing.T) {
	c, clock := newMarket(t, points(1, 0), points(0), nil)
	controls := c.ControlHandler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer secret" {
			http.Error(w, "token", http.StatusUnauthorized)
			return
		}
		controls.ServeHTTP(w, r)
	}))
	defer srv.Close()
	inst := mustLaunch(t, c, offer(v100A, capacity.OnDemand))

	at, err := Remote{Endpoint: srv.URL, Token: "secret"}.Interrupt(inst.ID, 30*time.Second)
	if err != nil || !at.Equal(clock.Now()) {
		t.Fatalf("Interrupt: notice at %v, %v; want one now (%v)", at, err, clock.Now())
	}
	if st, _ := c.Status(inst.ID); st.State != capacity.StateInterrupted || !st.InterruptAt.Equal(clock.Now().Add(30*time.Second)) {
		t.Errorf("instance %s, taken at %v; want interrupted, taken in 30s", st.State, st.InterruptAt)
	}
	if _, err := (Remote{Endpoint: srv.URL, Token: "secret"}).Interrupt("i-nope", time.Second); !capacity.IsNotFound(err) {
		t.Errorf("an unknown instance: %v; want not found", err)
	}
	if _, err := (Remote{Endpoint: srv.URL, Token: "wrong"}).Interrupt(inst.ID, time.Second); err == nil || !strings.Contains(err.Error(), "--sim-control-token-file") {
		t.Errorf("a wrong token: %v; want an error naming --sim-control-token-file", err)
	}
}
