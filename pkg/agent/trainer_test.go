package agent

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// The tests run this test binary as the trainer: with REFUEL_FAKE_TRAINER
// set, TestMain plays a trainer instead of running tests.
const fakeTrainerEnv = "REFUEL_FAKE_TRAINER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(fakeTrainerEnv); mode != "" {
		// A hang guard: no fake trainer outlives a broken test for long.
		time.AfterFunc(time.Minute, func() { os.Exit(99) })
		os.Exit(fakeTrainer(mode))
	}
	os.Exit(m.Run())
}

// fakeTrainer follows the trainer contract. Its checkpoints hold a file
// "state" with the step and a nested file derived from it. Modes:
//
//	complete: write FAKE_STEPS checkpoints after the one restored, exit 0
//	wait:     write one checkpoint, then on SIGTERM a final one and exit 0
//	fail:     print 30 lines on stderr and exit 3
//	stubborn: ignore SIGTERM, start a child that ignores it too, wait
//	child:    the stubborn trainer's child
//	env:      print its environment, one "ENVVAR name=value" line each, and its workdir
//	chatty:   print FAKE_LINES numbered lines, alternately on stdout and stderr, exit 0
func fakeTrainer(mode string) int {
	dir := os.Getenv("REFUEL_CHECKPOINT_DIR")
	step := resume(dir)
	fmt.Printf("ENV job=%s instance=%s\n", os.Getenv("REFUEL_JOB_ID"), os.Getenv("REFUEL_INSTANCE_ID"))
	switch mode {
	case "complete":
		n, _ := strconv.Atoi(os.Getenv("FAKE_STEPS"))
		for range n {
			step++
			writeCheckpoint(dir, step)
			fmt.Printf("REFUEL_PROGRESS step=%d total=%d\n", step, 100)
		}
		return 0
	case "wait":
		term := make(chan os.Signal, 1)
		signal.Notify(term, syscall.SIGTERM)
		step++
		writeCheckpoint(dir, step)
		fmt.Printf("REFUEL_PROGRESS step=%d\n", step)
		<-term
		fmt.Fprintln(os.Stderr, "got SIGTERM, saving")
		step++
		writeCheckpoint(dir, step)
		return 0
	case "fail":
		for i := range 30 {
			fmt.Fprintf(os.Stderr, "error line %d\n", i)
		}
		return 3
	case "stubborn":
		signal.Ignore(syscall.SIGTERM)
		child := exec.Command(os.Args[0])
		child.Env = append(os.Environ(), fakeTrainerEnv+"=child")
		out, err := child.StdoutPipe()
		if err != nil || child.Start() != nil {
			return 98
		}
		// Wait until the child ignores SIGTERM too, so only SIGKILL ends it.
		bufio.NewReader(out).ReadString('\n')
		fmt.Printf("CHILD pid=%d\n", child.Process.Pid)
		fmt.Println("REFUEL_PROGRESS step=1")
		select {}
	case "child":
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ready")
		select {}
	case "env":
		for _, kv := range os.Environ() {
			fmt.Printf("ENVVAR %s\n", kv)
		}
		wd, _ := os.Getwd()
		fmt.Printf("WORKDIR %s\n", wd)
		return 0
	case "chatty":
		n, _ := strconv.Atoi(os.Getenv("FAKE_LINES"))
		for i := range n {
			out := os.Stdout
			if i%2 == 1 {
				out = os.Stderr
			}
			fmt.Fprintf(out, "line %03d\n", i)
		}
		return 0
	}
	return 97
}

// resume prints what the trainer found in its checkpoint directory and
// returns the step to continue from.
func resume(dir string) int64 {
	steps, err := localSteps(dir)
	if err != nil || len(steps) == 0 {
		fmt.Println("RESUMED step=0 state=")
		return 0
	}
	newest := steps[len(steps)-1]
	state, _ := os.ReadFile(filepath.Join(dir, newest.name, "state"))
	fmt.Printf("RESUMED step=%d state=%s\n", newest.step, state)
	return newest.step
}

// writeCheckpoint writes step the way the contract asks: into a "." temp
// directory, renamed when complete.
func writeCheckpoint(dir string, step int64) {
	tmp := filepath.Join(dir, fmt.Sprintf(".tmp-%d", step))
	must(os.MkdirAll(filepath.Join(tmp, "nested"), 0o755))
	must(os.WriteFile(filepath.Join(tmp, "state"), []byte(strconv.FormatInt(step, 10)), 0o644))
	must(os.WriteFile(filepath.Join(tmp, "nested", "weights"), weights(step), 0o644))
	must(os.Rename(tmp, filepath.Join(dir, stepName(step))))
}

// weights is a checkpoint's bulk, different for every step.
func weights(step int64) []byte {
	b := make([]byte, 100<<10)
	for i := range b {
		b[i] = byte(int64(i)*7 + step)
	}
	return b
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(96)
	}
}
