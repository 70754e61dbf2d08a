package pool

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"refuel/pkg/capacity"
	"refuel/pkg/spec"
)

const example = `
base:
  name: dc1
  provider: onprem
  nodes:
    - {name: gpu-node-01, instance_type: a100-8x, gpus: 8, zone: dc1-a}
  counts:
    - {instance_type: l4-1x, gpus: 1, count: 2, zone: dc1-b, price_per_hour: 0.3}
burst:
  - name: aws-us-east-1
    max_instances: 10
    offerings:
      - {provider: aws, instance_type: g5.xlarge, zone: us-east-1a, market: spot, gpus: 1, price_per_hour: 0.45}
      - {provider: aws, instance_type: g5.xlarge, zone: us-east-1a, market: on-demand, gpus: 1, price_per_hour: 1.006}
aging_per_hour: 5
`

func TestParseConfig(t *testing.T) {
	c, err := ParseConfig([]byte(example))
	if err != nil {
		t.Fatal(err)
	}
	want := []Node{
		{Name: "gpu-node-01", InstanceType: "a100-8x", GPUs: 8, Zone: "dc1-a"},
		{Name: "dc1-l4-1x-1", InstanceType: "l4-1x", GPUs: 1, Zone: "dc1-b", PricePerHour: 0.3},
		{Name: "dc1-l4-1x-2", InstanceType: "l4-1x", GPUs: 1, Zone: "dc1-b", PricePerHour: 0.3},
	}
	if diff := cmp.Diff(c.Base.Inventory(), want); diff != "" {
		t.Errorf("inventory got(-), want(+):\n%s", diff)
	}
	if c.AgingPerHour != 5 || c.Burst[0].MaxInstances != 10 || c.Burst[0].Offerings[1].Market != capacity.OnDemand {
		t.Errorf("parsed %+v", c)
	}
	if got := want[0].Offering("onprem"); got.Market != capacity.Base || got.Key() != "onprem/a100-8x/dc1-a/base" {
		t.Errorf("node offering %+v", got)
	}
}

// Counts of one instance type in several zones number their machines
// on from each other, so no two machines share a name.
func TestInventoryNumbersCountsOfOneTypeOn(t *testing.T) {
	b := BaseGroup{Name: "dc", Counts: []BaseCount{{InstanceType: "a100-8x", GPUs: 8, Count: 2, Zone: "z1"}, {InstanceType: "l4", GPUs: 1, Count: 1, Zone: "z1"}, {InstanceType: "a100-8x", GPUs: 8, Count: 1, Zone: "z2"}}}
	var got []string
	for _, n := range b.Inventory() {
		got = append(got, n.Name+"@"+n.Zone)
	}
	want := []string{"dc-a100-8x-1@z1", "dc-a100-8x-2@z1", "dc-l4-1@z1", "dc-a100-8x-3@z2"}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("got(-), want(+):\n%s", diff)
	}
}

func TestTimeoutsDefault(t *testing.T) {
	var c Config
	if c.ReserveTimeoutOrDefault() != DefaultReserveTimeout || c.GangTimeoutOrDefault() != DefaultGangTimeout {
		t.Errorf("unset timeouts: %s, %s", c.ReserveTimeoutOrDefault(), c.GangTimeoutOrDefault())
	}
	c.ReserveTimeout, c.GangTimeout = spec.Duration(time.Minute), spec.Duration(time.Hour)
	if c.ReserveTimeoutOrDefault() != time.Minute || c.GangTimeoutOrDefault() != time.Hour {
		t.Errorf("set timeouts: %s, %s", c.ReserveTimeoutOrDefault(), c.GangTimeoutOrDefault())
	}
}

func TestParseConfigFillsDefaults(t *testing.T) {
	c, err := ParseConfig([]byte("base: {name: b, counts: [{instance_type: t, gpus: 1, count: 1}]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.AgingPerHour != DefaultAgingPerHour || c.Base.Provider != "base" {
		t.Errorf("defaults not filled: %+v", c)
	}
}

func TestValidateNamesEveryBadField(t *testing.T) {
	cases := map[string]struct {
		edit   func(*Config)
		fields []string
	}{
		"base without name": {func(c *Config) { c.Base.Name = "" }, []string{"base.name"}},
		"bad base name":     {func(c *Config) { c.Base.Name = "DC 1" }, []string{"base.name"}},
		"node without name": {func(c *Config) { c.Base.Nodes[0].Name = "" }, []string{"base.nodes[0].name"}},
		"node twice":        {func(c *Config) { c.Base.Nodes = append(c.Base.Nodes, c.Base.Nodes[0]) }, []string{"base.nodes[1].name"}},
		"node takes a name": {func(c *Config) { c.Base.Nodes[0].Name = "dc1-l4-1x-2" }, []string{"base.nodes[0].name"}},
		"node type":         {func(c *Config) { c.Base.Nodes[0].InstanceType = " " }, []string{"base.nodes[0].instance_type"}},
		"node gpus":         {func(c *Config) { c.Base.Nodes[0].GPUs = 0 }, []string{"base.nodes[0].gpus"}},
		"count":             {func(c *Config) { c.Base.Counts[0].Count = 0 }, []string{"base.counts[0].count"}},
		"join, no token":    {func(c *Config) { c.Base.Join = true }, []string{"base.token_file"}},
		"token, no join":    {func(c *Config) { c.Base.TokenFile = "/t" }, []string{"base.token_file"}},
		"heartbeat timeout": {func(c *Config) { c.Base.HeartbeatTimeout = -1 }, []string{"base.heartbeat_timeout"}},
		"count price":       {func(c *Config) { c.Base.Counts[0].PricePerHour = -1 }, []string{"base.counts[0].price_per_hour"}},
		"pool name":         {func(c *Config) { c.Burst[0].Name = "" }, []string{"burst[0].name"}},
		"pool twice": {func(c *Config) {
			c.Burst = append(c.Burst, BurstPool{Name: c.Burst[0].Name, Offerings: []capacity.Offering{odOffering}})
		}, []string{"burst[1].name"}},
		"pool cap":        {func(c *Config) { c.Burst[0].MaxInstances = -1 }, []string{"burst[0].max_instances"}},
		"no offerings":    {func(c *Config) { c.Burst[0].Offerings = nil }, []string{"burst[0].offerings"}},
		"offering market": {func(c *Config) { c.Burst[0].Offerings[0].Market = capacity.Base }, []string{"burst[0].offerings[0].market"}},
		"offering price":  {func(c *Config) { c.Burst[0].Offerings[0].PricePerHour = 0 }, []string{"burst[0].offerings[0].price_per_hour"}},
		"offering gpus":   {func(c *Config) { c.Burst[0].Offerings[1].GPUs = 0 }, []string{"burst[0].offerings[1].gpus"}},
		"offering fields": {func(c *Config) { c.Burst[0].Offerings[0].Provider, c.Burst[0].Offerings[0].Zone = "", "" }, []string{"burst[0].offerings[0].provider", "burst[0].offerings[0].zone"}},
		"offering twice":  {func(c *Config) { c.Burst[0].Offerings[1] = c.Burst[0].Offerings[0] }, []string{"burst[0].offerings[1]"}},
		"aging":           {func(c *Config) { c.AgingPerHour = -1 }, []string{"aging_per_hour"}},
		"preempt gap":     {func(c *Config) { c.PreemptGap = 101 }, []string{"preempt_gap"}},
		"preempt after":   {func(c *Config) { c.PreemptAfter = -1 }, []string{"preempt_after"}},
		"reserve timeout": {func(c *Config) { c.ReserveTimeout = -1 }, []string{"reserve_timeout"}},
		"gang timeout":    {func(c *Config) { c.GangTimeout = spec.Duration(25 * time.Hour) }, []string{"gang_timeout"}},
		"node takes a later count's name": {func(c *Config) {
			c.Base.Counts = append(c.Base.Counts, BaseCount{InstanceType: "l4-1x", GPUs: 1, Count: 1, Zone: "dc1-c"})
			c.Base.Nodes[0].Name = "dc1-l4-1x-3"
		}, []string{"base.nodes[0].name"}},
		"no capacity at all":            {func(c *Config) { c.Base = BaseGroup{}; c.Burst = nil }, []string{"base"}},
		"several at once":               {func(c *Config) { c.Base.Nodes[0].GPUs = -1; c.Burst[0].Offerings[0].Market = "reserved" }, []string{"base.nodes[0].gpus", "burst[0].offerings[0].market"}},
		"burst without base is allowed": {func(c *Config) { c.Base = BaseGroup{}; c.AgingPerHour = -1 }, []string{"aging_per_hour"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, err := ParseConfig([]byte(example))
			if err != nil {
				t.Fatal(err)
			}
			tc.edit(&c)
			var ve *spec.ValidationError
			if err := c.Validate(); !errors.As(err, &ve) {
				t.Fatalf("error %v; want *spec.ValidationError", err)
			}
			var got []string
			for _, f := range ve.Fields {
				got = append(got, f.Field)
				if f.Fix == "" {
					t.Errorf("%s: no fix given", f.Field)
				}
			}
			if diff := cmp.Diff(got, tc.fields); diff != "" {
				t.Errorf("fields got(-), want(+):\n%s", diff)
			}
		})
	}
}

var odOffering = capacity.Offering{Provider: "aws", InstanceType: "p3.2xlarge", Zone: "us-east-1b", Market: capacity.OnDemand, GPUs: 1, PricePerHour: 3.06}

func TestParseConfigRejectsUnknownAndMistypedFields(t *testing.T) {
	cases := map[string]struct{ doc, mention string }{
		"typo":       {"base: {name: b, node: []}\n", "node"},
		"wrong type": {"base: {name: b, counts: [{instance_type: t, gpus: one, count: 1}]}\n", "gpus"},
		"empty":      {"", "empty"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.mention) {
				t.Errorf("error %v; want one mentioning %q", err, tc.mention)
			}
		})
	}
}

// The pools file `make run` uses parses and says what its comments say.
func TestExamplePoolsFile(t *testing.T) {
	c, err := ReadConfig(filepath.Join("..", "..", "examples", "pools.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(c.Base.Inventory()); n != 2 || len(c.Burst) != 1 || c.Burst[0].MaxInstances != 3 {
		t.Errorf("example pools: %d base machines, %d burst pools; want 2 and 1 capped at 3", n, len(c.Burst))
	}
}

// The example `make run` uses stays a valid pools file.
func TestExamplePoolsFileIsValid(t *testing.T) {
	c, err := ReadConfig("../../examples/pools.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Base.Inventory()) == 0 || len(c.Burst) == 0 || c.PreemptGap != 1 {
		t.Errorf("example: %d base machines, %d burst pools, preempt gap %d", len(c.Base.Inventory()), len(c.Burst), c.PreemptGap)
	}
}

// A base group may be nothing but the machines that join.
func TestParseConfigJoinedBase(t *testing.T) {
	c, err := ParseConfig([]byte("base: {name: dc, join: true, token_file: /etc/refuel/join-token, heartbeat_timeout: 10s}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !c.Base.Join || len(c.Base.Inventory()) != 0 || c.Base.HeartbeatTimeoutOrDefault() != 10*time.Second {
		t.Errorf("parsed %+v", c.Base)
	}
}

func TestJoinProof(t *testing.T) {
	tok := []byte("0123456789abcdef0123")
	proof := JoinProof(tok, "gpu-01", "s1")
	cases := map[string]struct {
		token         []byte
		name, session string
		want          bool
	}{
		"right":         {tok, "gpu-01", "s1", true},
		"wrong token":   {[]byte("fedcba98765432100123"), "gpu-01", "s1", false},
		"other name":    {tok, "gpu-02", "s1", false},
		"other session": {tok, "gpu-01", "s2", false},
	}
	for name, tc := range cases {
		if got := CheckJoinProof(tc.token, tc.name, tc.session, proof); got != tc.want {
			t.Errorf("%s: got %v, want %v", name, got, tc.want)
		}
	}
}

func TestReadTokenRefusesShortTokens(t *testing.T) {
	dir := t.TempDir()
	short, long := filepath.Join(dir, "short"), filepath.Join(dir, "long")
	if err := os.WriteFile(short, []byte("abc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(long, []byte(" 0123456789abcdef0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadToken(short); err == nil || !strings.Contains(err.Error(), "openssl rand") {
		t.Errorf("short token: %v", err)
	}
	if tok, err := ReadToken(long); err != nil || string(tok) != "0123456789abcdef0123" {
		t.Errorf("long token: %q, %v", tok, err)
	}
}

func TestValidateJoiningNamesFields(t *testing.T) {
	err := ValidateJoining(Node{Name: "Bad Name", InstanceType: "a100-8x", GPUs: 0})
	var ve *spec.ValidationError
	if !errors.As(err, &ve) || !strings.Contains(err.Error(), "join.name") || !strings.Contains(err.Error(), "join.gpus") {
		t.Errorf("got %v", err)
	}
	if err := ValidateJoining(Node{Name: "gpu-01", InstanceType: "a100-8x", GPUs: 8}); err != nil {
		t.Errorf("good machine: %v", err)
	}
}
