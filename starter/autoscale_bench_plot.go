package main

import (
	"fmt"
	"image/color"
	"image/png"
	"os"
	"strings"
	"time"

	"refuel/pkg/servingsim"
)

var (
	plotDemand   = color.RGBA{150, 150, 150, 255}
	plotForecast = color.RGBA{255, 127, 14, 255}
	plotReady    = color.RGBA{31, 119, 180, 255}
	plotMiss     = color.RGBA{214, 69, 65, 255}
)

// plotRun is one policy's run of the plotted scenario.
type plotRun struct {
	policy string
	row    autoscaleRow
	steps  []servingsim.Sample
}

// writeAutoscalePlot draws one scenario: the demand, refuel's forecast
// (the load it expected plus its margin, drawn at the moment it was
// for) and the replicas serving under refuel; below it, a strip per
// policy marking the intervals with fewer replicas serving than demand.
func writeAutoscalePlot(path, scenario string, seed uint64, runs []plotRun) error {
	h := plotTop + plotChartH + 50 + float64(len(runs))*(plotStripH+plotStripGap) + 30
	var c canvas
	var save func(*os.File) error
	if strings.HasSuffix(path, ".svg") {
		s := &svgCanvas{}
		c, save = s, func(f *os.File) error { return s.write(f, plotW, h) }
	} else {
		p := newPNGCanvas(int(plotW), int(h))
		c, save = p, func(f *os.File) error { return png.Encode(f, p.img) }
	}
	drawAutoscale(c, scenario, seed, runs)
	f, err := os.Create(path)
	if err != nil {
		return &FlagError{"plot", fmt.Sprintf("cannot create %s: %v", path, err), "give a writable path"}
	}
	if err := save(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func drawAutoscale(c canvas, scenario string, seed uint64, runs []plotRun) {
	refuel := runs[0].steps
	if len(refuel) == 0 {
		return
	}
	span := refuel[len(refuel)-1].At.Hours()
	top := 1.0
	for _, s := range refuel {
		top = max(top, s.Demand, float64(s.Ready))
		if f := s.Decision.Forecast; f != nil {
			top = max(top, f.Load+f.Margin)
		}
	}
	top = float64(int(top*1.1) + 1)
	chartW := plotW - plotLeft - plotRight
	x := func(hours float64) float64 { return plotLeft + min(hours, span)/span*chartW }
	y := func(replicas float64) float64 { return plotTop + plotChartH - replicas/top*plotChartH }

	c.text(plotLeft, 20, fmt.Sprintf("%s, seed %d: demand (grey), refuel's forecast with its margin (orange) and replicas serving (blue)", scenario, seed), plotInk)
	for _, frac := range []float64{0, 0.25, 0.5, 0.75, 1} {
		c.line(plotLeft, y(frac*top), plotLeft+chartW, y(frac*top), plotGrid, 1)
		c.text(8, y(frac*top)+4, fmt.Sprintf("%.0f replicas", frac*top), plotInk)
	}
	tickEvery := niceStep(span)
	if span <= 2 {
		tickEvery = 0.25
	}
	for t := 0.0; t <= span; t += tickEvery {
		c.line(x(t), plotTop, x(t), plotTop+plotChartH, plotGrid, 1)
		c.text(x(t)-8, plotTop+plotChartH+16, strings.TrimSuffix(fmt.Sprintf("%.2f", t), ".00")+"h", plotInk)
	}
	c.text(plotLeft+chartW/2-80, plotTop+plotChartH+32, "time since start (replicas on the left axis)", plotInk)
	for i := 1; i < len(refuel); i++ {
		a, b := refuel[i-1], refuel[i]
		c.line(x(a.At.Hours()), y(a.Demand), x(b.At.Hours()), y(b.Demand), plotDemand, 1)
	}
	var px, py float64
	drawn := false
	for _, s := range refuel {
		f := s.Decision.Forecast
		if f == nil {
			drawn = false
			continue
		}
		// The forecast is for one lead time after the newest load it read.
		ahead := f.At.Sub(benchEpoch)
		nx, ny := x(ahead.Hours()), y(f.Load+f.Margin)
		if drawn && ahead.Hours() <= span {
			c.line(px, py, nx, ny, plotForecast, 1)
		}
		px, py, drawn = nx, ny, true
	}
	for i := 1; i < len(refuel); i++ {
		a, b := refuel[i-1], refuel[i]
		c.line(x(a.At.Hours()), y(float64(a.Ready)), x(b.At.Hours()), y(float64(a.Ready)), plotReady, 2)
		if a.Ready != b.Ready {
			c.line(x(b.At.Hours()), y(float64(a.Ready)), x(b.At.Hours()), y(float64(b.Ready)), plotReady, 2)
		}
	}
	stripTop := plotTop + plotChartH + 50
	for i, r := range runs {
		top := stripTop + float64(i)*(plotStripH+plotStripGap)
		c.text(plotLeft, top-5, fmt.Sprintf("%s: SLO attained %.2f%%, cost %.3fx the oracle's, %.1f replica-hours; red: too few replicas serving",
			r.policy, 100*r.row.Attainment, r.row.CostVsOracle, r.row.ReplicaHours), plotInk)
		c.rect(plotLeft, top, chartW, plotStripH, plotIdle)
		prev := time.Duration(0)
		for _, s := range r.steps {
			if s.Missed > 0 {
				x0, x1 := x(prev.Hours()), x(s.At.Hours())
				c.rect(x0, top, max(x1-x0, 1), plotStripH, plotMiss)
			}
			prev = s.At
		}
	}
}
