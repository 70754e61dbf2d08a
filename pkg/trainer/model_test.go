package trainer

import (
	"math"
	"testing"
	"time"
)

func TestTrainIsDeterministic(t *testing.T) {
	tests := map[string]Config{
		"default features": {Steps: 50, Seed: 1},
		"one feature":      {Steps: 50, Seed: 2, Features: 1},
		"wide":             {Steps: 20, Seed: 3, Features: 500},
		"no steps":         {Steps: 0, Seed: 4, Features: 8},
	}
	for name, cfg := range tests {
		t.Run(name, func(t *testing.T) {
			a, b := Train(cfg), Train(cfg)
			if a.Digest() != b.Digest() || a.Loss != b.Loss {
				t.Errorf("two runs differ: %s loss %g vs %s loss %g", a.Digest(), a.Loss, b.Digest(), b.Loss)
			}
			if a.Step != cfg.Steps {
				t.Errorf("Step = %d, want %d", a.Step, cfg.Steps)
			}
			if want := cfg.withDefaults().Features; len(a.Weights) != want {
				t.Errorf("len(Weights) = %d, want %d", len(a.Weights), want)
			}
		})
	}
}

// TestTrainGolden pins the exact bits, so a change to the problem or to the
// arithmetic (a fused multiply-add, a different generator) cannot slip by:
// it would make every recorded digest and drill comparison meaningless.
func TestTrainGolden(t *testing.T) {
	tests := map[string]struct {
		cfg    Config
		digest string
	}{
		"seed 1": {Config{Steps: 100, Seed: 1, Features: 8}, "262ffaa8c12396d81e92f3fc32110b798ec43f86f95e06f7b941c01f636ae261"},
		"seed 2": {Config{Steps: 100, Seed: 2, Features: 8}, "ac00537781ff63ef35786cec52dc7daf0e12db9ab5eddc007e7de0cbb60519f1"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Train(tc.cfg).Digest(); got != tc.digest {
				t.Errorf("Digest = %s, want %s", got, tc.digest)
			}
		})
	}
}

func TestTrainLearns(t *testing.T) {
	tests := map[string]Config{
		"narrow":  {Seed: 5, Features: 4},
		"default": {Seed: 6},
		"wide":    {Seed: 7, Features: 1000},
	}
	for name, cfg := range tests {
		t.Run(name, func(t *testing.T) {
			cfg.Steps = 0
			start := Train(cfg).Loss
			cfg.Steps = 2000
			end := Train(cfg).Loss
			floor := noise * noise / 3
			if math.IsNaN(end) || end > floor+0.1*(start-floor) {
				t.Errorf("loss went from %g to %g (floor %g); want at least 90%% of the way down", start, end, floor)
			}
		})
	}
}

func TestDigestSeesEveryBit(t *testing.T) {
	base := Model{Weights: []float64{1, 2, 3}}
	tests := map[string]struct {
		weights []float64
		same    bool
	}{
		"equal":            {[]float64{1, 2, 3}, true},
		"last bit":         {[]float64{1, 2, math.Nextafter(3, 4)}, false},
		"negative zero":    {[]float64{1, 2, 3, math.Copysign(0, -1)}, false},
		"order":            {[]float64{2, 1, 3}, false},
		"step is not bits": {[]float64{1, 2, 3}, true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			other := Model{Step: 9, Weights: tc.weights}
			if got := base.Digest() == other.Digest(); got != tc.same {
				t.Errorf("digests equal = %v, want %v", got, tc.same)
			}
		})
	}
}

func TestStepsFor(t *testing.T) {
	tests := map[string]struct {
		work, stepTime time.Duration
		want           int64
	}{
		"exact":                  {time.Minute, 100 * time.Millisecond, 600},
		"rounds up":              {time.Minute + time.Nanosecond, 100 * time.Millisecond, 601},
		"48h":                    {48 * time.Hour, 100 * time.Millisecond, 1728000},
		"less than one step":     {time.Millisecond, time.Second, 1},
		"no work":                {0, time.Second, 1},
		"zero step time":         {time.Second, 0, 10},
		"negative step time":     {time.Second, -time.Second, 10},
		"one-nanosecond steps":   {time.Second, time.Nanosecond, 1e9},
		"longest work, ns steps": {math.MaxInt64, time.Nanosecond, math.MaxInt64},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := StepsFor(tc.work, tc.stepTime); got != tc.want {
				t.Errorf("StepsFor(%v, %v) = %d, want %d", tc.work, tc.stepTime, got, tc.want)
			}
		})
	}
}
