package policy

import (
	"time"

	"refuel/pkg/capacity"
)

// ProbeEvery is how often refuel tries spot in a zone it last saw out of
// stock, to learn whether the stock is back. A run that knows a zone only
// by trying it (replay.Job.LearnsByTrying) otherwise sees every tick on
// on-demand as stock just back, never older, and holds on-demand long
// after the stock returned. A try refused costs nothing; one taken costs
// its billed minute, once per return of the stock, as the zone is then
// believed in stock until a try is refused.
const ProbeEvery = time.Hour

// Probes names the zones refuel tries spot in at the start of the step s
// is at, after deciding held: at each whole ProbeEvery of the run's
// time, every zone but the one held that was last seen out of stock or
// never seen.
func Probes(s State, m Market, held Choice) []string {
	if m.Step <= 0 || s.Elapsed%ProbeEvery >= m.Step {
		return nil
	}
	var out []string
	for _, z := range m.Zones {
		if held.Market == capacity.Spot && z.Name == held.Zone || z.History.Last {
			continue
		}
		out = append(out, z.Name)
	}
	return out
}
