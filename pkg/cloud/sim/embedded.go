package sim

import (
	"embed"
	"io/fs"
	"path"
	"sort"
	"strings"

	"refuel/pkg/trace"
)

// The default market is built into every binary, so a worker started in
// any directory has a real spot market to replay: AWS availability of
// V100 (p3.2xlarge, p3.16xlarge) and K80 (p2 family) instances in
// us-west-2a and us-west-2b, sampled every 10 minutes from 2022-10-26 for
// 27 days (see traces/README.md).
//
//go:embed traces
var embeddedTraces embed.FS

// DefaultMarketName names the built-in market in flags, logs and errors.
const DefaultMarketName = "built-in market aws-10-26-2022"

const defaultMarketDir = "traces/aws-10-26-2022"

// DefaultMarket is FromTraces over the built-in market.
func DefaultMarket(catalogue []InstanceType) (cfg Config, skipped []string, err error) {
	var paths []string
	err = fs.WalkDir(embeddedTraces, defaultMarketDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.EqualFold(path.Ext(p), ".json") {
			paths = append(paths, p)
		}
		return err
	})
	if err != nil {
		return Config{}, nil, err
	}
	sort.Strings(paths)
	load := func(p string) (*trace.Trace, error) {
		b, err := embeddedTraces.ReadFile(p)
		if err != nil {
			return nil, err
		}
		return trace.Parse(p, b)
	}
	return fromTraces(paths, load, DefaultMarketName, catalogue)
}
