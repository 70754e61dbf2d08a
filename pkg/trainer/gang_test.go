package trainer

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// life says how one life of a gang ends: a rank stopped (as by SIGTERM)
// or killed (as by SIGKILL, its connection closed) right after a step.
type life struct {
	stop map[int]int64
	kill map[int]int64
}

// rankEnd is how one rank's life ended.
type rankEnd struct {
	m        Model
	out, log string
	err      error
}

// gangLife runs one life of a gang of nodes in-process over loopback:
// rank 0 keeps its checkpoints in dir0, the others in directories of
// their own, fresh as a replacement node's, where the job's latest
// checkpoint is restored as the agent restores it on every rank. edit,
// when set, adjusts each rank's session before it starts.
func gangLife(t *testing.T, cfg Config, nodes int, dir0 string, l life, edit func(rank int, s *session)) []rankEnd {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ends := make([]rankEnd, nodes)
	var wg sync.WaitGroup
	for r := range nodes {
		ctx, cancel := context.WithCancel(t.Context())
		kill := make(chan struct{})
		var out, log bytes.Buffer
		dir := dir0
		if r > 0 {
			dir = t.TempDir()
			if m, _, found, _ := latest(dir0, io.Discard); found {
				name := stepDirName(m.Step)
				if err := os.CopyFS(filepath.Join(dir, name), os.DirFS(filepath.Join(dir0, name))); err != nil {
					t.Fatal(err)
				}
			}
		}
		s := &session{
			cfg:  cfg.withDefaults(),
			gang: gang{Rank: r, Nodes: nodes, Master: ln.Addr().String(), Job: "job", Attempt: "1"},
			dir:  dir, out: &out, log: &log, kill: kill,
		}
		if r == 0 {
			s.listener = ln
		}
		stopAt, stops := l.stop[r]
		killAt, kills := l.kill[r]
		from, _, _, _ := latest(dir0, io.Discard)
		if stops && stopAt == from.Step {
			cancel() // before the first step
		}
		s.afterStep = func(step int64) {
			if stops && step == stopAt {
				cancel()
			}
			if kills && step == killAt {
				close(kill)
			}
		}
		if edit != nil {
			edit(r, s)
		}
		wg.Go(func() {
			defer cancel()
			m, err := s.run(ctx)
			ends[r] = rankEnd{m: m, out: out.String(), log: log.String(), err: err}
		})
	}
	wg.Wait()
	return ends
}

// TrainGang of one node is Train; of more, its sums are grouped by shard,
// which shows in the bits of the first steps.
func TestTrainGangOfOneIsTrain(t *testing.T) {
	cfg := Config{Steps: 30, Seed: 3, Features: 5}
	if got, want := TrainGang(cfg, 1).Digest(), Train(cfg).Digest(); got != want {
		t.Errorf("TrainGang(cfg, 1) = %s; want Train's %s", got, want)
	}
	cfg.Steps = 1
	for _, nodes := range []int{2, 3} {
		if TrainGang(cfg, nodes).Digest() == Train(cfg).Digest() {
			t.Errorf("a step of a gang of %d has the bits of a step alone: the gang's sums are not the shards'", nodes)
		}
	}
}

// The gradient of a range of samples is the per-sample gradients summed
// in order: skipping the samples before a shard draws exactly what they
// would have drawn.
func TestShardGradientsAddUp(t *testing.T) {
	p := newProblem(7, 6)
	w := []float64{0.5, -0.25, 0.125, 1, -1, 0.75}
	for _, n := range []int64{0, 1, 41} {
		whole := p.gradient(w, n, 0, batchSize)
		sum := make([]float64, len(w))
		for i := range batchSize {
			g := p.gradient(w, n, i, i+1)
			for j := range sum {
				sum[j] += g[j]
			}
		}
		if fmt.Sprint(sum) != fmt.Sprint(whole) {
			t.Errorf("step %d: per-sample gradients sum to %v; the batch's is %v", n, sum, whole)
		}
	}
	for _, nodes := range []int{1, 2, 3, 5, 32, 40} {
		covered := 0
		for r := range nodes {
			lo, hi := shard(r, nodes)
			if lo != covered || hi < lo {
				t.Fatalf("%d nodes: rank %d has samples [%d, %d); want them to start at %d", nodes, r, lo, hi, covered)
			}
			covered = hi
		}
		if covered != batchSize {
			t.Errorf("%d nodes cover %d samples; want %d", nodes, covered, batchSize)
		}
	}
}

// A gang of 2, 3 or 5 ranks over loopback trains TrainGang's model: rank
// 0's last checkpoint, and the digest every rank reports.
func TestGangEqualsTrainGang(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	tests := map[string]struct {
		cfg   Config
		nodes int
	}{
		"two ranks":          {Config{Steps: 40, CheckpointEvery: 1, Seed: 1, Features: 8}, 2},
		"three ranks":        {Config{Steps: 40, CheckpointEvery: 3, Seed: 2, Features: 8}, 3},
		"five, wide":         {Config{Steps: 12, CheckpointEvery: 1, Seed: 3, Features: 300}, 5},
		"more than a sample": {Config{Steps: 6, Seed: 4, Features: 3}, 33},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			ends := gangLife(t, tc.cfg, tc.nodes, dir, life{}, nil)
			want := TrainGang(tc.cfg, tc.nodes)
			wantDone := fmt.Sprintf("REFUEL_DONE step=%d total=%d loss=%g digest=%s", want.Step, want.Step, want.Loss, want.Digest())
			for r, e := range ends {
				if e.err != nil {
					t.Fatalf("rank %d: %v\n%s", r, e.err, e.log)
				}
				if last := lastLine(e.out); last != wantDone {
					t.Errorf("rank %d's last line %q; want %q", r, last, wantDone)
				}
			}
			// Every checkpoint, not only the last: SGD damps a difference
			// in the last bit of a sum within tens of steps, so the first
			// steps are where a sum in another order shows.
			for step := int64(1); step <= tc.cfg.Steps; step++ {
				if !tc.cfg.checkpointDue(step) {
					continue
				}
				cfg := tc.cfg
				cfg.Steps = step
				got, err := ReadCheckpoint(filepath.Join(dir, stepDirName(step)))
				if want := TrainGang(cfg, tc.nodes); err != nil || got.Digest() != want.Digest() {
					t.Errorf("rank 0's checkpoint of step %d is %s (%v); want TrainGang's %s", step, got.Digest(), err, want.Digest())
				}
			}
		})
	}
}

// However often the gang is stopped, by whichever rank, and resumed from
// rank 0's checkpoint (the other ranks on fresh nodes), it ends with
// TrainGang's model; every stop ends every rank at the same step, with
// rank 0's checkpoint of it on disk.
func TestGangResumeIsExact(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	cfg := Config{Steps: 30, CheckpointEvery: 7, Seed: 5, Features: 6}
	tests := map[string]struct {
		nodes int
		lives []life
		// stopped is the step each life must end at.
		stopped []int64
	}{
		"rank 0 stopped":             {2, []life{{stop: map[int]int64{0: 11}}}, []int64{11}},
		"another rank stopped":       {3, []life{{stop: map[int]int64{2: 5}}}, []int64{6}},
		"every rank stopped at once": {3, []life{{stop: map[int]int64{0: 9, 1: 9, 2: 9}}}, []int64{9}},
		"on a checkpoint boundary":   {2, []life{{stop: map[int]int64{0: 14}}, {stop: map[int]int64{1: 20}}}, []int64{14, 21}},
		// Stopped before the gang forms, every rank is stopped, as the run
		// stops every node when one ends.
		"before the first step":        {2, []life{{stop: map[int]int64{0: 0, 1: 0}}, {stop: map[int]int64{0: 4}}}, []int64{0, 4}},
		"again without progress":       {3, []life{{stop: map[int]int64{0: 8}}, {stop: map[int]int64{0: 8, 1: 8, 2: 8}}, {stop: map[int]int64{1: 25}}}, []int64{8, 8, 26}},
		"one step before the end":      {2, []life{{stop: map[int]int64{0: 29}}}, []int64{29}},
		"a rank's stop after the last": {2, []life{{stop: map[int]int64{1: 29}}}, []int64{30}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			for i, l := range tc.lives {
				want := tc.stopped[i]
				for r, e := range gangLife(t, cfg, tc.nodes, dir, l, nil) {
					if e.err != nil {
						t.Fatalf("life %d, rank %d: %v\n%s", i, r, e.err, e.log)
					}
					if e.m.Step != want {
						t.Errorf("life %d: rank %d ended at step %d; want %d\n%s", i, r, e.m.Step, want, e.log)
					}
				}
				if _, err := ReadCheckpoint(filepath.Join(dir, stepDirName(want))); err != nil {
					t.Fatalf("life %d: no checkpoint of step %d: %v", i, want, err)
				}
			}
			ends := gangLife(t, cfg, tc.nodes, dir, life{}, nil)
			if want := TrainGang(cfg, tc.nodes); ends[0].m.Digest() != want.Digest() || ends[0].err != nil {
				t.Errorf("resumed gang ends with %s (%v); want TrainGang's %s", ends[0].m.Digest(), ends[0].err, want.Digest())
			}
		})
	}
}

// A rank that vanishes mid-run (killed: its connection closes) stops the
// gang cleanly: rank 0 checkpoints the last step done and ends as if
// stopped, the others end too, and the gang resumed on a replacement ends
// with TrainGang's model. A rank 0 that vanishes ends the others.
func TestGangRankVanishes(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	cfg := Config{Steps: 24, CheckpointEvery: 5, Seed: 6, Features: 4}
	tests := map[string]struct {
		killed int
		at     int64
		// stopped are the last lines the others may end with.
		stopped []string
		// resumeFrom is rank 0's checkpoint after the loss.
		resumeFrom int64
	}{
		"another rank": {killed: 2, at: 8, stopped: []string{"REFUEL_STOPPED step=8 total=24"}, resumeFrom: 8},
		// Killed after its step 8, rank 0 may or may not have sent it.
		"rank 0": {killed: 0, at: 8, stopped: []string{"REFUEL_STOPPED step=7 total=24", "REFUEL_STOPPED step=8 total=24"}, resumeFrom: 5},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			ends := gangLife(t, cfg, 3, dir, life{kill: map[int]int64{tc.killed: tc.at}}, nil)
			for r, e := range ends {
				switch {
				case r == tc.killed:
					if e.err != errKilled {
						t.Errorf("killed rank %d ended with %v; want it killed", r, e.err)
					}
				case e.err != nil:
					t.Errorf("rank %d: %v; want it to end cleanly when rank %d vanished\n%s", r, e.err, tc.killed, e.log)
				case !slices.Contains(tc.stopped, lastLine(e.out)):
					t.Errorf("rank %d's last line %q; want one of %q", r, lastLine(e.out), tc.stopped)
				case !strings.Contains(e.log, "went away"):
					t.Errorf("rank %d's log does not say a rank went away:\n%s", r, e.log)
				}
			}
			if m, _, _, _ := latest(dir, io.Discard); m.Step != tc.resumeFrom {
				t.Fatalf("rank 0's latest checkpoint is step %d; want %d", m.Step, tc.resumeFrom)
			}
			again := gangLife(t, cfg, 3, dir, life{}, nil)
			if want := TrainGang(cfg, 3); again[0].m.Digest() != want.Digest() {
				t.Errorf("the gang resumed after the loss ends with %s; want TrainGang's %s", again[0].m.Digest(), want.Digest())
			}
		})
	}
}

// A rank that stays silent, its machine gone without closing anything,
// is taken for gone after the peer timeout: rank 0 checkpoints and ends;
// a rank whose rank 0 is silent ends. The silent end is a bare
// connection that joins and then says nothing.
func TestGangSilentRankTimesOut(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	cfg := Config{Steps: 50, CheckpointEvery: 10, Seed: 7, Features: 3, PeerTimeout: 200 * time.Millisecond}.withDefaults()
	g := gang{Nodes: 2, Job: "job", Attempt: "1"}
	t.Run("another rank", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		var log bytes.Buffer
		s := &session{cfg: cfg, gang: g, dir: dir, out: io.Discard, log: &log, listener: ln}
		s.gang.Master = ln.Addr().String()
		silent := make(chan net.Conn, 1)
		go func() {
			conn, err := net.Dial("tcp", s.gang.Master)
			if err != nil {
				silent <- nil
				return
			}
			h := s.hello(1)
			var w welcome
			if writeMessage(conn, h) != nil || readMessage(conn, &w) != nil {
				t.Error("the silent rank could not join")
			}
			silent <- conn // and says nothing more
		}()
		m, err := s.run(t.Context())
		if conn := <-silent; conn != nil {
			conn.Close()
		}
		if err != nil || m.Step != 0 || !strings.Contains(log.String(), "rank 1 went away during step 1: no answer within 200ms") {
			t.Errorf("rank 0 ended at step %d (%v); want step 0, saying rank 1 did not answer:\n%s", m.Step, err, log.String())
		}
		if _, err := ReadCheckpoint(filepath.Join(dir, stepDirName(0))); err != nil {
			t.Errorf("rank 0 left no checkpoint of step 0: %v", err)
		}
	})
	t.Run("rank 0", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		var out, log bytes.Buffer
		s := &session{cfg: cfg, gang: g, dir: t.TempDir(), out: &out, log: &log}
		s.gang.Rank, s.gang.Master = 1, ln.Addr().String()
		silent := make(chan net.Conn, 1)
		go func() {
			conn, err := ln.Accept()
			if err != nil {
				silent <- nil
				return
			}
			var h hello
			if readMessage(conn, &h) != nil || writeMessage(conn, welcome{}) != nil {
				t.Error("the silent rank 0 could not welcome rank 1")
			}
			_, _ = conn.Write(encodeFrame(nil, frame{step: 0, vec: make([]float64, cfg.Features)}))
			silent <- conn // and says nothing more
		}()
		m, err := s.run(t.Context())
		if conn := <-silent; conn != nil {
			conn.Close()
		}
		if err != nil || m.Step != 0 || lastLine(out.String()) != "REFUEL_STOPPED step=0 total=50" || !strings.Contains(log.String(), "no answer within 200ms") {
			t.Errorf("rank 1 ended at step %d (%v), output %q; want it stopped at step 0, saying rank 0 did not answer:\n%s", m.Step, err, out.String(), log.String())
		}
	})
}

// Joining fails clearly, and never hangs: a rank of another run is
// refused and says why; ranks that never come or a rank 0 that never
// answers end at the join timeout; a stop while waiting ends the wait.
func TestGangJoin(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	cfg := Config{Steps: 20, Seed: 8, Features: 3, JoinTimeout: 300 * time.Millisecond}
	t.Run("another run's rank", func(t *testing.T) {
		ends := gangLife(t, cfg, 2, t.TempDir(), life{}, func(rank int, s *session) {
			if rank == 1 {
				s.cfg.Steps = 21
			}
		})
		if err := ends[1].err; err == nil || !strings.Contains(err.Error(), "refused rank 1: seed 8, 3 features, 21 steps; not seed 8, 3 features, 20 steps") {
			t.Errorf("rank 1 of another run: %v; want it refused, saying why", err)
		}
		if err := ends[0].err; err == nil || !strings.Contains(err.Error(), "ranks [1] did not join") {
			t.Errorf("rank 0 waiting for a rank of its own: %v; want it to give up at the join timeout", err)
		}
	})
	t.Run("no rank 0", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close() // nothing listens there
		s := &session{cfg: cfg.withDefaults(), gang: gang{Rank: 1, Nodes: 2, Master: addr}, dir: t.TempDir(), out: io.Discard, log: io.Discard}
		began := time.Now()
		_, err = s.run(t.Context())
		if err == nil || !strings.Contains(err.Error(), "did not answer rank 1 within 300ms") {
			t.Errorf("rank 1 without a rank 0: %v; want it to give up at the join timeout", err)
		}
		t.Logf("gave up after %s", time.Since(began).Round(time.Millisecond))
	})
	t.Run("stopped while waiting", func(t *testing.T) {
		for rank := range 2 {
			ctx, cancel := context.WithCancel(t.Context())
			var out bytes.Buffer
			cfg := cfg
			cfg.JoinTimeout = time.Hour
			s := &session{cfg: cfg.withDefaults(), gang: gang{Rank: rank, Nodes: 3, Master: "127.0.0.1:1"}, dir: t.TempDir(), out: &out, log: io.Discard}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			s.listener = ln
			if rank == 1 {
				s.gang.Master = ln.Addr().String()
				go func() { // a rank 0 that never answers
					conn, err := ln.Accept()
					if err == nil {
						<-ctx.Done()
						conn.Close()
					}
				}()
			}
			time.AfterFunc(50*time.Millisecond, cancel)
			_, err = s.run(ctx)
			ln.Close()
			if err != nil || lastLine(out.String()) != "REFUEL_STOPPED step=0 total=20" {
				t.Errorf("rank %d stopped while waiting: %v, output %q; want it stopped at step 0", rank, err, out.String())
			}
		}
	})
}

// Rank 0 stopped while it waits for a rank that never comes tells the
// rank that did join, which stops too rather than fail.
func TestGangStoppedBeforeItForms(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	cfg := Config{Steps: 20, Seed: 8, Features: 3}.withDefaults()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := gang{Nodes: 3, Master: ln.Addr().String()}
	log0 := &syncBuffer{}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	lead := &session{cfg: cfg, gang: g, dir: t.TempDir(), out: io.Discard, log: log0, listener: ln}
	var out1, log1 bytes.Buffer
	g.Rank = 1
	follower := &session{cfg: cfg, gang: g, dir: t.TempDir(), out: &out1, log: &log1}
	ended := make(chan error, 1)
	go func() {
		_, err := follower.run(t.Context())
		ended <- err
	}()
	go func() {
		for !strings.Contains(log0.String(), "rank 1 joined") {
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
	}()
	if _, err := lead.run(ctx); err != nil {
		t.Fatalf("rank 0: %v", err)
	}
	if err := <-ended; err != nil || lastLine(out1.String()) != "REFUEL_STOPPED step=0 total=20" {
		t.Errorf("rank 1: %v, output %q; want it stopped at step 0\n%s", err, out1.String(), log1.String())
	}
}

// syncBuffer is a bytes.Buffer safe to read while a session writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func TestGangFromEnv(t *testing.T) {
	tests := map[string]struct {
		env  map[string]string
		want gang
		err  string
	}{
		"alone":           {env: map[string]string{}, want: gang{Nodes: 1}},
		"one node":        {env: map[string]string{NumNodesEnv: "1", NodeRankEnv: "junk"}, want: gang{Nodes: 1}},
		"rank 1 of 3":     {env: map[string]string{NumNodesEnv: "3", NodeRankEnv: "1", MasterAddrEnv: "10.0.0.7", MasterPortEnv: "29500", "REFUEL_JOB_ID": "j", "REFUEL_ATTEMPT": "4"}, want: gang{Rank: 1, Nodes: 3, Master: "10.0.0.7:29500", Job: "j", Attempt: "4"}},
		"IPv6 master":     {env: map[string]string{NumNodesEnv: "2", NodeRankEnv: "0", MasterAddrEnv: "::1", MasterPortEnv: "1"}, want: gang{Nodes: 2, Master: "[::1]:1"}},
		"bad count":       {env: map[string]string{NumNodesEnv: "two"}, err: `REFUEL_NUM_NODES="two": want the number of nodes, 1 or more`},
		"rank past nodes": {env: map[string]string{NumNodesEnv: "2", NodeRankEnv: "2", MasterAddrEnv: "a", MasterPortEnv: "1"}, err: `REFUEL_NODE_RANK="2": want this node's rank, 0 to 1`},
		"no master": {env: map[string]string{NumNodesEnv: "2", NodeRankEnv: "1", MasterPortEnv: "65536"},
			err: "REFUEL_MASTER_ADDR is not set: want rank 0's address\nREFUEL_MASTER_PORT=\"65536\": want the port rank 0 listens on, 1 to 65535"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := gangFromEnv(func(k string) string { return tc.env[k] })
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Errorf("error %v; want %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("gangFromEnv = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// The trainer process (Main) as rank 0 and the in-process one (Embedded)
// as rank 1 read their places from the contract's variables and train
// TrainGang's model together.
func TestMainAndEmbeddedTrainAGang(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close() // rank 0 listens there itself
	cfg := Config{Steps: 25, CheckpointEvery: 10, Seed: 9, Features: 4}
	args := strings.Fields("--steps 25 --checkpoint-every 10 --step-time 0 --seed 9 --features 4")
	gangEnv := []string{NumNodesEnv + "=2", MasterAddrEnv + "=127.0.0.1", MasterPortEnv + "=" + port, "REFUEL_JOB_ID=j", "REFUEL_ATTEMPT=2"}
	dir0 := filepath.Join(t.TempDir(), "ckpt")
	for _, kv := range append(gangEnv, NodeRankEnv+"=0", CheckpointDirEnv+"="+dir0) {
		name, value, _ := strings.Cut(kv, "=")
		t.Setenv(name, value)
	}
	var out0, out1, log0, log1 bytes.Buffer
	codes := make(chan int, 1)
	go func() { codes <- Main(args, &out0, &log0) }()
	env1 := append(gangEnv, NodeRankEnv+"=1", CheckpointDirEnv+"="+t.TempDir())
	if code := Embedded(context.Background(), nil, args, env1, &out1, &log1); code != 0 {
		t.Fatalf("rank 1 (Embedded) = %d:\n%s", code, log1.String())
	}
	if code := <-codes; code != 0 {
		t.Fatalf("rank 0 (Main) = %d:\n%s", code, log0.String())
	}
	want := TrainGang(cfg, 2).Digest()
	for r, out := range []string{out0.String(), out1.String()} {
		if !strings.Contains(lastLine(out), "digest="+want) {
			t.Errorf("rank %d's last line %q; want TrainGang's digest %s", r, lastLine(out), want)
		}
	}
}

// An elastic gang resumed from its checkpoint on fewer nodes (and so on
// any other number) trains TrainWidths' model for the widths it trained
// at, checkpoint by checkpoint: the checkpoint holds the weights alone,
// and every attempt reads its width from REFUEL_NUM_NODES.
func TestGangResumedOnAnotherWidthIsTrainWidths(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	cfg := Config{Steps: 16, CheckpointEvery: 1, Seed: 7, Features: 300}
	dir := t.TempDir()
	gangLife(t, cfg, 3, dir, life{kill: map[int]int64{2: 8}}, nil)
	m, _, _, _ := latest(dir, io.Discard)
	gangLife(t, cfg, 2, dir, life{}, nil)
	widths := []Width{{From: 0, Nodes: 3}, {From: m.Step, Nodes: 2}}
	for step := m.Step + 1; step <= cfg.Steps; step++ {
		at := cfg
		at.Steps = step
		got, err := ReadCheckpoint(filepath.Join(dir, stepDirName(step)))
		want := TrainWidths(at, widths)
		if err != nil || got.Digest() != want.Digest() {
			t.Errorf("checkpoint of step %d is %s (%v); want TrainWidths' %s (3 nodes to step %d, then 2)", step, got.Digest(), err, want.Digest(), m.Step)
		}
		if step == m.Step+1 && (want.Digest() == TrainGang(at, 3).Digest() || want.Digest() == TrainGang(at, 2).Digest()) {
			t.Errorf("at step %d TrainWidths equals a gang of one width: the test tells nothing", step)
		}
	}
}
