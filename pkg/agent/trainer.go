package agent

import (
	"math"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"refuel/pkg/checkpoint"
)

// outputDrain bounds how long the agent waits for the trainer's output
// pipes after it exited: a child that inherited them may keep them open.
const outputDrain = 2 * time.Second

// exitKilled is the exit status of a trainer killed by SIGKILL, shell style.
const exitKilled = 128 + int(syscall.SIGKILL)

// running is a started trainer: a process, or a Func in the agent's own.
type running interface {
	// done is closed once the trainer has exited and its output is read.
	done() <-chan struct{}
	// terminate asks it to save a final checkpoint and exit: SIGTERM.
	terminate()
	// kill ends it and whatever it started at once: SIGKILL.
	kill()
	// exitCode is its exit status, valid once done is closed.
	exitCode() int
}

// start launches the trainer, with its output read line by line into the
// attempt's output, progress events and the tail of stderr.
func (r *run) start(stderrTail *tail) (running, error) {
	env, dir, err := r.environment()
	if err != nil {
		return nil, err
	}
	r.say("%s", environmentLine(env, os.Environ()))
	stdout := &lineWriter{copy: r.cfg.Stdout, line: func(s string, partial bool) {
		r.log.add(checkpoint.Stdout, s, partial)
		if !partial {
			r.progressLine(s)
			r.stoppedLine(s)
		}
	}}
	stderr := &lineWriter{copy: r.cfg.Stderr, line: func(s string, partial bool) {
		r.log.add(checkpoint.Stderr, s, partial)
		stderrTail.add(s)
	}}
	if r.cfg.Func != nil {
		r.say("attempt %d on %s: running %q in this agent's process", r.cfg.Attempt, r.cfg.InstanceID, r.cfg.Command)
		return startFunction(r.cfg.Func, r.cfg.Command[1:], env, stdout, stderr), nil
	}
	path, err := resolveCommand(r.cfg.Command[0], env, dir)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, r.cfg.Command[1:]...)
	cmd.Dir, cmd.Env = dir, env
	r.say("attempt %d on %s: running %q in %s", r.cfg.Attempt, r.cfg.InstanceID, r.cfg.Command, cmd.Dir)
	return startProcess(cmd, stdout, stderr)
}

// environment is the trainer's environment and workdir as the contract
// has them: its own variables, its workdir, which must exist.
func (r *run) environment() (env []string, dir string, err error) {
	contract := []string{
		"REFUEL_CHECKPOINT_DIR=" + r.checkpointDir(),
		"REFUEL_JOB_ID=" + r.cfg.JobID,
		"REFUEL_INSTANCE_ID=" + r.cfg.InstanceID,
		"REFUEL_ATTEMPT=" + strconv.Itoa(r.cfg.Attempt),
	}
	if d := r.cfg.CheckpointInterval; d > 0 {
		contract = append(contract, "REFUEL_CHECKPOINT_INTERVAL_SECONDS="+strconv.FormatInt(int64(max(1, math.Round(d.Seconds()))), 10))
	}
	contract = append(contract, r.cfg.Gang.environment()...)
	if env, err = trainerEnv(os.Environ(), r.cfg.Env, r.dev.contract(contract)); err != nil {
		return nil, "", err
	}
	if dir, err = resolveWorkdir(r.cfg.Workdir, r.cfg.WorkdirBase, r.dev.workdir(r.cfg.Dir)); err != nil {
		return nil, "", err
	}
	return env, dir, nil
}

// stopTrainer sends the trainer SIGTERM and waits for it until deadline,
// or until the machine is gone, then kills it. It reports whether it had
// to kill.
func stopTrainer(t running, deadline time.Time, gone <-chan struct{}) (killed bool) {
	t.terminate()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case <-t.done():
		return false
	case <-timer.C:
	case <-gone:
	}
	t.kill()
	<-t.done()
	return true
}

func exited(t running) bool {
	select {
	case <-t.done():
		return true
	default:
		return false
	}
}

// process is a trainer running as a command.
type process struct {
	cmd    *exec.Cmd
	exited chan struct{}
}

// startProcess launches cmd in a process group of its own, so signals
// reach everything it started.
func startProcess(cmd *exec.Cmd, stdout, stderr *lineWriter) (*process, error) {
	cmd.SysProcAttr = sysProcAttr()
	cmd.WaitDelay = outputDrain
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &process{cmd: cmd, exited: make(chan struct{})}
	go func() {
		defer close(p.exited)
		// The exit status is read from cmd.ProcessState; Wait's error adds
		// nothing to it.
		_ = cmd.Wait()
		stdout.flush()
		stderr.flush()
	}()
	return p, nil
}

func (p *process) done() <-chan struct{} { return p.exited }
func (p *process) terminate()            { p.signal(syscall.SIGTERM) }

// kill sends SIGKILL to the trainer's whole group.
func (p *process) kill() { p.signal(syscall.SIGKILL) }

func (p *process) signal(sig syscall.Signal) {
	// The group may be gone already (ESRCH); there is nothing to do then.
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
}

// exitCode is the trainer's exit status, shell style: 128+n for signal n.
func (p *process) exitCode() int {
	ps := p.cmd.ProcessState
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
