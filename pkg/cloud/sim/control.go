package sim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// ControlHandler serves the sim's own controls, which EC2 does not have,
// for demos and tests that drive a sim in another process (worker
// ec2-sim). Answers are JSON; a bad parameter is a 400 naming it.
//
//	GET  /sim/market                           tick, pools and instances (with metadata endpoints)
//	POST /sim/advance?ticks=N                   move the market N ticks (default 1)
//	POST /sim/interrupt?instance=ID[&grace=D]   serve a notice; take the instance after D (default the notice window)
//	POST /sim/faults?fail-inits=N&throttle=N    fail the next N initialisations; throttle the next N calls
//	POST /sim/spot-price?zone=Z&type=T&price=P  change a pool's spot price
func (c *Cloud) ControlHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /sim/market", func(w http.ResponseWriter, _ *http.Request) {
		m := c.Market()
		writeJSON(w, map[string]any{
			"tick": m.Tick, "trace_time": m.TraceTime.String(), "tick_length": c.cfg.Tick.String(),
			"pools": m.Pools, "instances": c.Instances(),
		})
	})
	mux.HandleFunc("POST /sim/advance", func(w http.ResponseWriter, r *http.Request) {
		n, err := intParam(r, "ticks", 1)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c.Advance(n)
		writeJSON(w, map[string]int{"tick": c.Tick()})
	})
	mux.HandleFunc("POST /sim/interrupt", func(w http.ResponseWriter, r *http.Request) {
		grace := c.noticeWindowOf(r.FormValue("instance"))
		if s := r.FormValue("grace"); s != "" {
			d, err := time.ParseDuration(s)
			if err != nil || d < 0 {
				http.Error(w, fmt.Sprintf("grace %q: want a duration such as 20s", s), http.StatusBadRequest)
				return
			}
			grace = d
		}
		at, err := c.Interrupt(r.FormValue("instance"), grace)
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		writeJSON(w, map[string]time.Time{"notice_at": at, "terminate_at": at.Add(grace)})
	})
	mux.HandleFunc("POST /sim/faults", func(w http.ResponseWriter, r *http.Request) {
		inits, err := intParam(r, "fail-inits", -1)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		throttle, err := intParam(r, "throttle", -1)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		set := map[string]int{}
		if inits >= 0 {
			c.FailNextInits(inits)
			set["fail_inits"] = inits
		}
		if throttle >= 0 {
			c.ThrottleNext(throttle)
			set["throttle"] = throttle
		}
		writeJSON(w, set)
	})
	mux.HandleFunc("POST /sim/spot-price", func(w http.ResponseWriter, r *http.Request) {
		price, err := strconv.ParseFloat(r.FormValue("price"), 64)
		if err == nil {
			err = c.SetSpotPrice(Pool{Zone: r.FormValue("zone"), InstanceType: r.FormValue("type")}, price)
		}
		if err != nil {
			http.Error(w, "price: "+err.Error(), http.StatusBadRequest)
			return
		}
		writeJSON(w, map[string]float64{"price": price})
	})
	return mux
}

func intParam(r *http.Request, name string, def int) (int, error) {
	s := r.FormValue(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s %q: want a count (0, 1, 2, ...)", name, s)
	}
	return n, nil
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
