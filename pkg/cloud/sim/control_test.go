package sim

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"refuel/pkg/capacity"
)

func TestControlHandler(t *testing.T) {
	c, clock := newMarket(t, points(1, 0), points(0), nil)
	srv := httptest.NewServer(c.ControlHandler())
	defer srv.Close()
	inst := mustLaunch(t, c, offer(v100A, capacity.OnDemand))
	post := func(path string, form url.Values) int {
		t.Helper()
		resp, err := http.PostForm(srv.URL+path, form)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	cases := []struct {
		path   string
		form   url.Values
		status int
	}{
		{"/sim/advance", url.Values{"ticks": {"1"}}, 200},
		{"/sim/advance", url.Values{"ticks": {"-1"}}, 400},
		{"/sim/faults", url.Values{"fail-inits": {"2"}, "throttle": {"1"}}, 200},
		{"/sim/faults", url.Values{"throttle": {"many"}}, 400},
		{"/sim/spot-price", url.Values{"zone": {zoneA}, "type": {"p3.2xlarge"}, "price": {"1.5"}}, 200},
		{"/sim/spot-price", url.Values{"zone": {zoneA}, "type": {"p3.16xlarge"}, "price": {"1.5"}}, 400},
		{"/sim/interrupt", url.Values{"instance": {inst.ID}, "grace": {"soon"}}, 400},
		{"/sim/interrupt", url.Values{"instance": {"i-nope"}}, 404},
		{"/sim/interrupt", url.Values{"instance": {inst.ID}, "grace": {"30s"}}, 200},
	}
	for _, tc := range cases {
		if got := post(tc.path, tc.form); got != tc.status {
			t.Errorf("POST %s %v: HTTP %d; want %d", tc.path, tc.form, got, tc.status)
		}
	}
	if c.Tick() != 1 || c.APICall() == nil {
		t.Errorf("tick %d, throttling %v: the controls did not reach the market", c.Tick(), c.APICall())
	}
	st, _ := c.Status(inst.ID)
	if st.State != capacity.StateInterrupted || !st.InterruptAt.Equal(clock.Now().Add(30*time.Second)) {
		t.Errorf("after /sim/interrupt: %s, taken at %s", st.State, st.InterruptAt)
	}

	resp, err := http.Get(srv.URL + "/sim/market")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m struct {
		Tick      int         `json:"tick"`
		Pools     []PoolState `json:"pools"`
		Instances []Status    `json:"instances"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	if m.Tick != 1 || len(m.Pools) != 3 || len(m.Instances) != 1 || m.Instances[0].State != capacity.StateInterrupted {
		t.Errorf("market %+v", m)
	}
}
