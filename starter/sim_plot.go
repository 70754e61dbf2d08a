package main

import (
	"bufio"
	"fmt"
	"html"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"os"
	"strings"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"

	"refuel/pkg/capacity"
	"refuel/pkg/policy"
	"refuel/pkg/replay"
)

// canvas is what the plot draws on: an SVG document or a PNG image.
type canvas interface {
	line(x0, y0, x1, y1 float64, c color.RGBA, width float64)
	rect(x, y, w, h float64, c color.RGBA)
	text(x, y float64, s string, c color.RGBA)
}

var (
	plotInk      = color.RGBA{40, 40, 40, 255}
	plotGrid     = color.RGBA{220, 220, 220, 255}
	plotSpot     = color.RGBA{46, 160, 67, 255}
	plotOnDemand = color.RGBA{214, 69, 65, 255}
	plotIdle     = color.RGBA{238, 238, 238, 255}
	plotDeadline = color.RGBA{120, 120, 120, 255}
	// One line colour per policy, in the order given.
	plotLines = []color.RGBA{{31, 119, 180, 255}, {255, 127, 14, 255}, {148, 103, 189, 255}, {23, 190, 207, 255}, {140, 86, 75, 255}, {227, 119, 194, 255}}
)

// Layout, in pixels.
const (
	plotW, plotLeft, plotRight = 1060.0, 130.0, 20.0
	// plotLabel is how many characters of a zone's name fit left of the
	// chart: a whole trace name such as us-west-2a_v100_1.
	plotLabel                = int((plotLeft - 4) / 7)
	plotTop, plotChartH      = 40.0, 320.0
	plotStripH, plotStripGap = 18.0, 26.0
	plotStockH               = 12.0
)

// writePlot draws each policy's progress against the deadline, and below
// it a strip per policy of the market held tick by tick (spot, on-demand,
// nothing; a black mark at each preemption), with each policy's cost.
func writePlot(path string, m *replay.Market, job replay.Job, names []policy.Name, results []replay.Result) error {
	h := plotTop + plotChartH + 50 + float64(len(m.Zones))*(plotStockH+2) + plotStripGap + float64(len(results))*(plotStripH+plotStripGap) + 30
	var c canvas
	var save func(*os.File) error
	if strings.HasSuffix(path, ".svg") {
		s := &svgCanvas{}
		c, save = s, func(f *os.File) error { return s.write(f, plotW, h) }
	} else {
		p := newPNGCanvas(int(plotW), int(h))
		c, save = p, func(f *os.File) error { return png.Encode(f, p.img) }
	}
	drawSim(c, m, job, names, results)
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

func drawSim(c canvas, m *replay.Market, job replay.Job, names []policy.Name, results []replay.Result) {
	gap := m.Gap.Hours()
	span := job.Deadline.Hours()
	for _, r := range results {
		span = max(span, r.Finish.Hours())
	}
	span *= 1.03
	work := job.Work.Hours()
	chartW := plotW - plotLeft - plotRight
	x := func(hours float64) float64 { return plotLeft + hours/span*chartW }
	y := func(done float64) float64 { return plotTop + plotChartH - done/work*plotChartH }

	c.text(plotLeft, 20, fmt.Sprintf("%s work, %s deadline, %s restart overhead; %s", job.Work, job.Deadline, job.RestartOverhead, plotPrices(m, job)), plotInk)
	for _, frac := range []float64{0, 0.25, 0.5, 0.75, 1} {
		c.line(plotLeft, y(frac*work), plotLeft+chartW, y(frac*work), plotGrid, 1)
		c.text(8, y(frac*work)+4, fmt.Sprintf("%.0fh", frac*work), plotInk)
	}
	tickEvery := niceStep(span)
	for t := 0.0; t <= span; t += tickEvery {
		c.line(x(t), plotTop, x(t), plotTop+plotChartH, plotGrid, 1)
		c.text(x(t)-8, plotTop+plotChartH+16, fmt.Sprintf("%.0fh", t), plotInk)
	}
	c.text(plotLeft+chartW/2-60, plotTop+plotChartH+32, "time since start (work done on the left axis)", plotInk)
	// The deadline, and the latest an uninterrupted on-demand run could start.
	dl := job.Deadline.Hours()
	c.line(x(dl), plotTop, x(dl), plotTop+plotChartH, plotDeadline, 2)
	c.text(x(dl)-60, plotTop-6, "deadline", plotDeadline)
	c.line(x(dl-work), y(0), x(dl), y(work), plotDeadline, 1)

	// Spot stock per zone over the same time.
	stockTop := plotTop + plotChartH + 50
	start := 0
	if len(results) > 0 {
		start = results[0].Start
	}
	for z, name := range m.Zones {
		top := stockTop + float64(z)*(plotStockH+2)
		c.text(2, top+plotStockH-1, name[:min(len(name), plotLabel)], plotInk)
		for t := 0; float64(t)*gap < span; t++ {
			if m.Available(z, start+t, job.Nodes) {
				c.rect(x(float64(t)*gap), top, max(x(float64(t+1)*gap)-x(float64(t)*gap), 1), plotStockH, plotSpot)
			}
		}
	}
	stockLabel := "spot in stock, per zone"
	if job.Nodes > 1 {
		stockLabel = fmt.Sprintf("spot in stock for all %d nodes, per zone", job.Nodes)
	}
	c.text(plotLeft, stockTop-6, stockLabel, plotInk)
	stripTop := stockTop + float64(len(m.Zones))*(plotStockH+2) + plotStripGap
	for i, r := range results {
		col := plotLines[i%len(plotLines)]
		px, py := x(0), y(0)
		for t, st := range r.Steps {
			end := float64(t+1) * gap
			if t == len(r.Steps)-1 && r.Finished {
				end = r.Finish.Hours()
			}
			nx, ny := x(end), y(st.Done.Hours())
			c.line(px, py, nx, ny, col, 2)
			px, py = nx, ny
		}
		top := stripTop + float64(i)*(plotStripH+plotStripGap)
		met := "met"
		if !r.DeadlineMet {
			met = "MISSED"
		}
		c.text(plotLeft, top-5, fmt.Sprintf("%s: $%.2f (%.1f%% of on-demand), finished %.1fh, deadline %s, %d preemptions, %d changeovers",
			names[i], r.Cost, 100*r.Cost/job.OnDemandCost(), r.Finish.Hours(), met, r.Preemptions, r.Changeovers), col)
		for t, st := range r.Steps {
			fill := plotIdle
			switch st.Choice.Market {
			case capacity.Spot:
				fill = plotSpot
			case capacity.OnDemand:
				fill = plotOnDemand
			}
			x0, x1 := x(float64(t)*gap), x(float64(t+1)*gap)
			c.rect(x0, top, max(x1-x0, 1), plotStripH, fill)
			if st.Preempted {
				c.rect(x0, top, 2, plotStripH, plotInk)
			}
		}
	}
	legend := stripTop + float64(len(results))*(plotStripH+plotStripGap) + 8
	for i, item := range []struct {
		name string
		c    color.RGBA
	}{{"spot", plotSpot}, {"on-demand", plotOnDemand}, {"nothing held", plotIdle}, {"preemption", plotInk}} {
		lx := plotLeft + float64(i)*140
		c.rect(lx, legend, 14, 14, item.c)
		c.text(lx+20, legend+12, item.name, plotInk)
	}
}

// niceStep is a round spacing for about ten ticks over span hours.
func niceStep(span float64) float64 {
	for _, s := range []float64{1, 2, 4, 6, 12, 24, 48, 96, 168} {
		if span/s <= 12 {
			return s
		}
	}
	return 336
}

// svgCanvas collects SVG elements.
type svgCanvas struct{ b strings.Builder }

func rgb(c color.RGBA) string { return fmt.Sprintf("rgb(%d,%d,%d)", c.R, c.G, c.B) }

func (s *svgCanvas) line(x0, y0, x1, y1 float64, c color.RGBA, w float64) {
	fmt.Fprintf(&s.b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="%.1f"/>`+"\n", x0, y0, x1, y1, rgb(c), w)
}

func (s *svgCanvas) rect(x, y, w, h float64, c color.RGBA) {
	fmt.Fprintf(&s.b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`+"\n", x, y, w, h, rgb(c))
}

func (s *svgCanvas) text(x, y float64, t string, c color.RGBA) {
	fmt.Fprintf(&s.b, `<text x="%.1f" y="%.1f" fill="%s" font-family="monospace" font-size="12">%s</text>`+"\n", x, y, rgb(c), html.EscapeString(t))
}

func (s *svgCanvas) write(f *os.File, w, h float64) error {
	bw := bufio.NewWriter(f)
	fmt.Fprintf(bw, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f">`+"\n", w, h, w, h)
	fmt.Fprintf(bw, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	bw.WriteString(s.b.String())
	bw.WriteString("</svg>\n")
	return bw.Flush()
}

// pngCanvas draws on an image with the fixed 7x13 font.
type pngCanvas struct{ img *image.RGBA }

func newPNGCanvas(w, h int) *pngCanvas {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.Draw(img, img.Bounds(), image.White, image.Point{}, draw.Src)
	return &pngCanvas{img}
}

func (p *pngCanvas) line(x0, y0, x1, y1 float64, c color.RGBA, w float64) {
	n := int(max(abs(x1-x0), abs(y1-y0))) + 1
	r := int(w / 2)
	for i := 0; i <= n; i++ {
		t := float64(i) / float64(n)
		cx, cy := int(x0+(x1-x0)*t+0.5), int(y0+(y1-y0)*t+0.5)
		for dx := -r; dx <= r; dx++ {
			for dy := -r; dy <= r; dy++ {
				p.img.SetRGBA(cx+dx, cy+dy, c)
			}
		}
	}
}

func (p *pngCanvas) rect(x, y, w, h float64, c color.RGBA) {
	r := image.Rect(int(x+0.5), int(y+0.5), int(x+w+0.5), int(y+h+0.5))
	draw.Draw(p.img, r, &image.Uniform{c}, image.Point{}, draw.Src)
}

func (p *pngCanvas) text(x, y float64, s string, c color.RGBA) {
	d := font.Drawer{Dst: p.img, Src: &image.Uniform{c}, Face: basicfont.Face7x13, Dot: fixed.P(int(x), int(y))}
	d.DrawString(s)
}

func abs(v float64) float64 {
	if v < 0 {
		return -v
	}
	return v
}

// plotPrices says the prices the plotted window was replayed at: each
// zone's (after its cloud), when priced apart (--prices), else the job's.
func plotPrices(m *replay.Market, job replay.Job) string {
	if len(job.Zones) == 0 {
		return fmt.Sprintf("spot $%.4f/h, on-demand $%.2f/h; zones: %s", job.SpotPrice, job.OnDemandPrice, strings.Join(m.Zones, ", "))
	}
	parts := make([]string, len(m.Zones))
	for i, z := range m.Zones {
		if c := job.Zones[i].Cloud; c != "" {
			z = c + " " + z
		}
		parts[i] = fmt.Sprintf("%s spot $%.4f/h, on-demand $%.2f/h", z, job.Zones[i].Spot, job.Zones[i].OnDemand)
	}
	return "prices: " + strings.Join(parts, "; ")
}
