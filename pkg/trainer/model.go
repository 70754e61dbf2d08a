package trainer

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math"
	"math/rand/v2"
	"time"
)

// Defaults for the flags; Config's zero Features also means DefaultFeatures.
const (
	DefaultFeatures        = 64
	DefaultStepTime        = 100 * time.Millisecond
	DefaultCheckpointEvery = 50
	DefaultSeed            = 1
)

// The problem's fixed shape. Not configurable: changing any of these
// changes every digest ever recorded.
const (
	batchSize = 32
	noise     = 0.1 // amplitude of the uniform label noise
)

// Config is one training run.
type Config struct {
	// Steps is the total; the run is done when Model.Step reaches it.
	Steps int64
	// CheckpointEvery K checkpoints whenever the step is a multiple of K;
	// 0 checkpoints only at the end and when stopped.
	CheckpointEvery int64
	// StepTime paces each step to last at least this long, so a run's wall
	// time stands for real work; 0 runs as fast as possible.
	StepTime time.Duration
	Seed     uint64
	// Features is the number of weights; 0 means DefaultFeatures.
	Features int
	// JoinTimeout bounds how long a gang's ranks wait for each other to
	// start; 0 means DefaultJoinTimeout.
	JoinTimeout time.Duration
	// PeerTimeout bounds how long one step's exchange waits for another
	// rank before taking it for gone; 0 means DefaultPeerTimeout.
	PeerTimeout time.Duration
}

func (c Config) withDefaults() Config {
	if c.Features == 0 {
		c.Features = DefaultFeatures
	}
	if c.JoinTimeout == 0 {
		c.JoinTimeout = DefaultJoinTimeout
	}
	if c.PeerTimeout == 0 {
		c.PeerTimeout = DefaultPeerTimeout
	}
	return c
}

// checkpointDue reports whether a run writes a checkpoint after step.
func (c Config) checkpointDue(step int64) bool {
	return step == c.Steps || c.CheckpointEvery > 0 && step%c.CheckpointEvery == 0
}

// validate checks a config after withDefaults.
func (c Config) validate() error {
	var errs []error
	if c.Steps < 1 {
		errs = append(errs, errors.New("--steps must be at least 1"))
	}
	if c.CheckpointEvery < 0 {
		errs = append(errs, errors.New("--checkpoint-every must not be negative"))
	}
	if c.StepTime < 0 {
		errs = append(errs, errors.New("--step-time must not be negative"))
	}
	if c.Features < 1 {
		errs = append(errs, errors.New("--features must be at least 1"))
	}
	if c.JoinTimeout <= 0 || c.PeerTimeout <= 0 {
		errs = append(errs, errors.New("--join-timeout and --peer-timeout must be more than 0"))
	}
	return errors.Join(errs...)
}

// Model is the trainer's state after Step steps.
type Model struct {
	Step    int64
	Weights []float64
	// Loss is the expected squared error of Weights over the problem's
	// whole distribution, computed exactly rather than sampled.
	Loss float64
}

// Digest is the sha256 hex of the weights' exact bits, which is also the
// sha256 of the checkpoint's model.bin: equal digests mean bit-identical
// models.
func (m Model) Digest() string {
	sum := sha256.Sum256(encodeWeights(m.Weights))
	return hex.EncodeToString(sum[:])
}

// Train runs cfg from step 0 to cfg.Steps in memory, without pacing,
// checkpoints or output. It is the reference every resumed run must match.
func Train(cfg Config) Model {
	cfg = cfg.withDefaults()
	p := newProblem(cfg.Seed, cfg.Features)
	w := make([]float64, cfg.Features)
	for n := range cfg.Steps {
		p.step(w, n)
	}
	return Model{Step: cfg.Steps, Weights: w, Loss: p.loss(w)}
}

// TrainGang is the reference of a gang of nodes training cfg together,
// computed in one process: at every step each rank's shard of the batch
// gives a gradient at the same weights, and they are summed in rank order
// before the update, exactly as the demo trainer's ranks do over the
// network. It is what a gang's run must match bit for bit, however often
// it is stopped and resumed. TrainGang(cfg, 1) is Train(cfg); other node
// counts give other bits, since the sums are grouped differently.
func TrainGang(cfg Config, nodes int) Model {
	return TrainWidths(cfg, []Width{{Nodes: nodes}})
}

// Width is a stretch of an elastic gang's training: from step From on,
// Nodes nodes train together.
type Width struct {
	From  int64
	Nodes int
}

// TrainWidths is the reference of a gang whose width changed as it went:
// each step is taken by the nodes of the last width whose From is at or
// before it (one node before the first). An elastic gang resumed from a
// checkpoint on another number of nodes must match it bit for bit, as a
// rigid one matches TrainGang: the trainer's state is the weights alone,
// and each step's sums are grouped by the nodes that take it.
func TrainWidths(cfg Config, widths []Width) Model {
	cfg = cfg.withDefaults()
	p := newProblem(cfg.Seed, cfg.Features)
	w := make([]float64, cfg.Features)
	nodes := 1
	for n := range cfg.Steps {
		for _, wd := range widths {
			if wd.From <= n {
				nodes = max(wd.Nodes, 1)
			}
		}
		grads := make([][]float64, nodes)
		for r := range grads {
			lo, hi := shard(r, nodes)
			grads[r] = p.gradient(w, n, lo, hi)
		}
		combine(grads[0], grads[1:]...)
		p.apply(w, grads[0])
	}
	return Model{Step: cfg.Steps, Weights: w, Loss: p.loss(w)}
}

// StepsFor is how many steps of stepTime make up work, rounded up and at
// least 1. A stepTime that is not positive is taken as DefaultStepTime,
// since steps that take no time add up to no amount of work.
func StepsFor(work, stepTime time.Duration) int64 {
	if stepTime <= 0 {
		stepTime = DefaultStepTime
	}
	n := int64(work / stepTime)
	if work%stepTime > 0 {
		n++
	}
	return max(n, 1)
}

// problem is the regression task a seed defines: labels are x·truth plus
// noise, with x uniform in [-1, 1)^features.
type problem struct {
	seed  uint64
	truth []float64
	rate  float64
}

func newProblem(seed uint64, features int) problem {
	r := rand.New(rand.NewPCG(seed, 0))
	truth := make([]float64, features)
	for j := range truth {
		truth[j] = uniform(r)
	}
	// The rate shrinks as features outnumber the batch, keeping the largest
	// curvature of a mini-batch's loss inside SGD's stable range.
	rate := 0.25 * batchSize / float64(batchSize+features)
	return problem{seed: seed, truth: truth, rate: rate}
}

// step applies SGD step n (0-based) to w in place: the whole batch's
// gradient, then the update.
func (p problem) step(w []float64, n int64) {
	p.apply(w, p.gradient(w, n, 0, batchSize))
}

// gradient sums the squared error's gradient at w over samples [lo, hi)
// of step n's batch, in sample order from zero. The batch is drawn from one
// generator, so the samples before lo are drawn and dropped: each takes
// one number per feature and one for its noise. The explicit float64
// conversions round each product before it is added, which forbids the
// compiler from fusing them into FMA on some architectures and not others.
func (p problem) gradient(w []float64, n int64, lo, hi int) []float64 {
	r := rand.New(rand.NewPCG(p.seed, batchStream(n)))
	for range lo * (len(w) + 1) {
		r.Uint64()
	}
	x := make([]float64, len(w))
	grad := make([]float64, len(w))
	for range hi - lo {
		var pred, label float64
		for j := range x {
			x[j] = uniform(r)
			pred += float64(x[j] * w[j])
			label += float64(x[j] * p.truth[j])
		}
		label += float64(noise * uniform(r))
		residual := pred - label
		for j := range grad {
			grad[j] += float64(residual * x[j])
		}
	}
	return grad
}

// apply takes the SGD step of a whole batch's gradient.
func (p problem) apply(w, grad []float64) {
	scale := 2 * p.rate / batchSize
	for j := range w {
		w[j] -= float64(scale * grad[j])
	}
}

// shard is the part of every batch rank computes in a gang of nodes:
// samples [lo, hi), contiguous, in rank order. With more nodes than
// samples some shards are empty.
func shard(rank, nodes int) (lo, hi int) {
	return rank * batchSize / nodes, (rank + 1) * batchSize / nodes
}

// combine adds the gradients of ranks 1, 2, … to rank 0's, in rank order:
// floating-point addition is not associative, so the order is fixed for
// the sum, and so the model, to be the same bits every time.
func combine(sum []float64, grads ...[]float64) {
	for _, g := range grads {
		for j := range sum {
			sum[j] += g[j]
		}
	}
}

// loss is the expected squared error of w: with x and the noise uniform in
// [-1, 1) (variance 1/3 each), E[(x·(w-truth) - noise·u)²] is
// (|w-truth|² + noise²)/3.
func (p problem) loss(w []float64) float64 {
	var sq float64
	for j := range w {
		d := w[j] - p.truth[j]
		sq += float64(d * d)
	}
	return (sq + noise*noise) / 3
}

// uniform draws from [-1, 1) so that every platform draws the same numbers:
// doubling is exact, so fused or not the result is rounded once. NormFloat64
// would go through math.Exp, whose assembly differs between platforms.
func uniform(r *rand.Rand) float64 {
	return 2*r.Float64() - 1
}

// batchStream scatters step numbers over PCG's second seed word, so
// neighbouring steps get unrelated generators. It is a bijection that maps
// only 0 to 0, and n+1 is never 0, so no step shares the truth's stream.
func batchStream(n int64) uint64 {
	z := uint64(n) + 1
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

func encodeWeights(w []float64) []byte {
	b := make([]byte, 0, 8*len(w))
	for _, v := range w {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
	}
	return b
}

func decodeWeights(b []byte) []float64 {
	w := make([]float64, len(b)/8)
	for j := range w {
		w[j] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*j:]))
	}
	return w
}
