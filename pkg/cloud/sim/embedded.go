package sim

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"slices"
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

// BuiltIn prefixes the name of a market built into the binary where a
// directory of traces is asked for: "builtin:aws-02-15-2023".
const BuiltIn = "builtin:"

// BuiltInMarkets are the trace sets compiled into the binaries, the
// default first: aws-10-26-2022 (V100 and K80, two zones of us-west-2)
// and aws-02-15-2023 (p3.2xlarge in nine zones of three regions, the
// zones EmbeddedPrices prices).
var BuiltInMarkets = []string{"aws-10-26-2022", "aws-02-15-2023"}

const defaultMarketDir = "traces/aws-10-26-2022"

// DefaultMarket is FromTraces over the default built-in market.
func DefaultMarket(catalogue []InstanceType) (cfg Config, skipped []string, err error) {
	return builtInMarket(BuiltInMarkets[0], catalogue)
}

// MarketAt is the market a flag names: "" the default built-in one,
// "builtin:NAME" another built-in one, anything else a directory of
// ZONE_GPU_COUNT.json traces.
func MarketAt(where string, catalogue []InstanceType) (cfg Config, skipped []string, err error) {
	switch {
	case where == "":
		return DefaultMarket(catalogue)
	case strings.HasPrefix(where, BuiltIn):
		name := strings.TrimPrefix(where, BuiltIn)
		if !slices.Contains(BuiltInMarkets, name) {
			return Config{}, nil, fmt.Errorf("no built-in market %q: the binary has %s%s", name, BuiltIn, strings.Join(BuiltInMarkets, ", "+BuiltIn))
		}
		return builtInMarket(name, catalogue)
	}
	return FromTraces(where, catalogue)
}

func builtInMarket(name string, catalogue []InstanceType) (cfg Config, skipped []string, err error) {
	var paths []string
	err = fs.WalkDir(embeddedTraces, "traces/"+name, func(p string, d fs.DirEntry, err error) error {
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
	return fromTraces(paths, load, "built-in market "+name, catalogue)
}
