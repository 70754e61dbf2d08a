package deploy

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Dashboard is the part of a Grafana dashboard's JSON model refuel's
// checks read.
type Dashboard struct {
	Title      string  `json:"title"`
	UID        string  `json:"uid"`
	Panels     []Panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query string `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

// Panel is one panel of a dashboard; rows are panels too.
type Panel struct {
	ID         int        `json:"id"`
	Type       string     `json:"type"`
	Title      string     `json:"title"`
	Datasource Datasource `json:"datasource"`
	GridPos    struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Targets []struct {
		Expr       string     `json:"expr"`
		RefID      string     `json:"refId"`
		Datasource Datasource `json:"datasource"`
	} `json:"targets"`
}

// Datasource names the data source a panel or query reads.
type Datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// ParseDashboard reads a dashboard's JSON model.
func ParseDashboard(b []byte) (Dashboard, error) {
	var d Dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		return d, fmt.Errorf("dashboard JSON: %w", err)
	}
	return d, nil
}

// metricName matches the metrics refuel's worker exports: its own and the
// Temporal SDK's. PromQL functions and labels do not start so.
var metricName = regexp.MustCompile(`\b(?:refuel|temporal)_[a-zA-Z0-9_]+`)

// Metrics are the metric names the dashboard's queries read, a
// histogram's _bucket, _sum and _count series named by the histogram.
func (d Dashboard) Metrics() []string {
	var out []string
	for _, p := range d.Panels {
		for _, t := range p.Targets {
			out = append(out, QueriedMetrics(t.Expr)...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// QueriedMetrics are the metric names a PromQL expression reads.
func QueriedMetrics(expr string) []string {
	var out []string
	for _, m := range metricName.FindAllString(expr, -1) {
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			m, _ = strings.CutSuffix(m, suffix)
		}
		out = append(out, m)
	}
	return out
}
