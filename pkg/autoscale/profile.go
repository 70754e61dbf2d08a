package autoscale

import "time"

// ProfileBin is the width of one bin of the daily profile.
const ProfileBin = 5 * time.Minute

// profileBins is how many bins a day has.
const profileBins = int(24 * time.Hour / ProfileBin)

// DailyProfile is the load over the day: for each ProfileBin of the day
// (UTC), the highest load of the latest day that reached it. A bin is
// overwritten when the next day reaches it, so the bins ahead of now hold
// yesterday's loads: what the seasonal-naive forecaster reads.
type DailyProfile struct {
	// Start is the first sample: bins hold a whole day's load only from a
	// day after it.
	Start time.Time `json:"start,omitzero"`
	// Bins are the loads, one per bin from 00:00 UTC; empty until the
	// first sample.
	Bins []float64 `json:"bins,omitempty"`
	// Current is the bin being written, and CurrentSince when it began.
	Current      int       `json:"current"`
	CurrentSince time.Time `json:"current_since,omitzero"`
}

func profileBin(t time.Time) int {
	y, m, d := t.UTC().Date()
	return int(t.Sub(time.Date(y, m, d, 0, 0, 0, 0, time.UTC)) / ProfileBin)
}

// Put records the load v at t.
func (p *DailyProfile) Put(t time.Time, v float64) {
	if len(p.Bins) == 0 {
		p.Start, p.Bins = t, make([]float64, profileBins)
		p.Current, p.CurrentSince = profileBin(t), t
		p.Bins[p.Current] = v
		return
	}
	i := profileBin(t)
	// A new bin, or the same bin a day or more later, starts afresh.
	if i != p.Current || t.Sub(p.CurrentSince) >= ProfileBin {
		p.Current, p.CurrentSince = i, t.Truncate(ProfileBin)
		p.Bins[i] = v
		return
	}
	p.Bins[i] = max(p.Bins[i], v)
}

// At is the load of the bin of t as the latest day left it; ok is false
// until a whole day has been seen.
func (p *DailyProfile) At(t time.Time) (float64, bool) {
	if len(p.Bins) == 0 || t.Sub(p.Start) < 24*time.Hour+ProfileBin {
		return 0, false
	}
	return p.Bins[profileBin(t)], true
}
