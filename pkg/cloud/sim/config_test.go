package sim

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func writeTraces(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const someTrace = `{"metadata": {"gap_seconds": 600}, "data": [1, 0, 1]}`

func TestFromTraces(t *testing.T) {
	dir := writeTraces(t, map[string]string{
		"aws/us-west-2a_v100_1.json":       someTrace,
		"aws/us-west-2a_v100_8.json":       someTrace,
		"aws/us-west-2b_K80_1.json":        someTrace,
		"aws/us-east-1c_p3.8xlarge.json":   someTrace,
		"gcp/us-central1-a_c3-88.json":     someTrace,
		"aws/us-west-2b_v100_3.json":       someTrace,
		"aws/notes.txt":                    "not a trace",
		"aws/fast/us-east-1a_v100_1.json":  `{"metadata": {"gap_seconds": 195}, "data": [2]}`,
		"aws/fast/us-east-1a_t4_1.json":    `{"metadata": {"gap_seconds": 195}, "data": [2]}`,
		"aws/fast/us-east-1a_a100_8.json":  `{"metadata": {"gap_seconds": 195}, "data": [0]}`,
		"aws/fast/us-east-1a_a10g_1.json":  `{"metadata": {"gap_seconds": 195}, "data": [0]}`,
		"aws/fast/us-east-1a_k80_16.json":  `{"metadata": {"gap_seconds": 195}, "data": [0]}`,
		"aws/fast/us-east-1a_v100_4.json":  `{"metadata": {"gap_seconds": 195}, "data": [0]}`,
		"aws/fast/us-east-1a_k80_8.json":   `{"metadata": {"gap_seconds": 195}, "data": [0]}`,
		"aws/fast/us-east-1b_v100_16.json": `{"metadata": {"gap_seconds": 195}, "data": [0]}`,
	})
	cfg, skipped, err := FromTraces(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	var pools []string
	for _, p := range cfg.Pools {
		pools = append(pools, p.String())
	}
	slices.Sort(pools)
	want := []string{
		"us-east-1a/g4dn.xlarge", "us-east-1a/g5.xlarge", "us-east-1a/p2.16xlarge", "us-east-1a/p2.8xlarge",
		"us-east-1a/p3.2xlarge", "us-east-1a/p3.8xlarge", "us-east-1a/p4d.24xlarge",
		"us-east-1c/p3.8xlarge", "us-west-2a/p3.16xlarge", "us-west-2a/p3.2xlarge", "us-west-2b/p2.xlarge",
	}
	if diff := cmp.Diff(pools, want); diff != "" {
		t.Errorf("pools got(-), want(+):\n%s", diff)
	}
	if len(skipped) != 3 || !strings.Contains(strings.Join(skipped, "\n"), "us-central1-a_c3-88.json") {
		t.Errorf("skipped %q; want the c3-88, v100_3 and v100_16 traces", skipped)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.TickLength().Seconds() != 195 {
		t.Errorf("tick %s; want the smallest gap, 195s", c.TickLength())
	}
}

func TestFromTracesErrors(t *testing.T) {
	cases := map[string]struct {
		files map[string]string
		want  string
	}{
		"two traces for one pool": {map[string]string{"a/us-west-2a_v100_1.json": someTrace, "b/us-west-2a_v100_1.json": someTrace}, "two traces for pool us-west-2a/p3.2xlarge"},
		"nothing maps":            {map[string]string{"us-central1-a_c3-88.json": someTrace}, "no trace under"},
		"a bad trace":             {map[string]string{"us-west-2a_v100_1.json": `{"data": [1]}`}, "gap_seconds"},
		"no traces at all":        {map[string]string{"README.md": "#"}, "no trace files"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, _, err := FromTraces(writeTraces(t, tc.files), nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("FromTraces: %v; want an error mentioning %q", err, tc.want)
			}
		})
	}
}

// The collections shipped in shared/traces load as they are, when present.
func TestFromSharedTraces(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "..", "shared", "traces", "availability", "1-node", "aws-10-26-2022")
	if _, err := os.Stat(dir); err != nil {
		t.Skip("shared traces not present:", err)
	}
	cfg, skipped, err := FromTraces(dir, nil)
	if err != nil || len(cfg.Pools) != 8 || len(skipped) != 0 {
		t.Errorf("FromTraces(%s): %d pools, skipped %v, %v; want 8 pools", dir, len(cfg.Pools), skipped, err)
	}
}
