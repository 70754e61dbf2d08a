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

// trainer is the running command.
type trainer struct {
	cmd    *exec.Cmd
	stderr *tail
	// done is closed once the trainer has exited and its output is read.
	done chan struct{}
}

// start launches the trainer in a process group of its own, so signals
// reach everything it started.
func (r *run) start() (*trainer, error) {
	cmd, err := r.command()
	if err != nil {
		return nil, err
	}
	cmd.SysProcAttr = sysProcAttr()
	cmd.WaitDelay = outputDrain
	t := &trainer{cmd: cmd, stderr: newTail(stderrLines), done: make(chan struct{})}
	stdout := &lineWriter{copy: r.cfg.Stdout, line: func(s string, partial bool) {
		r.log.add(checkpoint.Stdout, s, partial)
		if !partial {
			r.progressLine(s)
		}
	}}
	stderr := &lineWriter{copy: r.cfg.Stderr, line: func(s string, partial bool) {
		r.log.add(checkpoint.Stderr, s, partial)
		t.stderr.add(s)
	}}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	r.say("attempt %d on %s: running %q in %s", r.cfg.Attempt, r.cfg.InstanceID, r.cfg.Command, cmd.Dir)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		defer close(t.done)
		// The exit status is read from cmd.ProcessState; Wait's error adds
		// nothing to it.
		_ = cmd.Wait()
		stdout.flush()
		stderr.flush()
	}()
	return t, nil
}

// command is the trainer's process as the contract has it: its own
// environment, its workdir, its program found on its own PATH.
func (r *run) command() (*exec.Cmd, error) {
	contract := []string{
		"REFUEL_CHECKPOINT_DIR=" + r.checkpointDir(),
		"REFUEL_JOB_ID=" + r.cfg.JobID,
		"REFUEL_INSTANCE_ID=" + r.cfg.InstanceID,
		"REFUEL_ATTEMPT=" + strconv.Itoa(r.cfg.Attempt),
	}
	if d := r.cfg.CheckpointInterval; d > 0 {
		contract = append(contract, "REFUEL_CHECKPOINT_INTERVAL_SECONDS="+strconv.FormatInt(int64(max(1, math.Round(d.Seconds()))), 10))
	}
	env, err := trainerEnv(os.Environ(), r.cfg.Env, contract)
	if err != nil {
		return nil, err
	}
	dir, err := resolveWorkdir(r.cfg.Workdir, r.cfg.WorkdirBase, r.cfg.Dir)
	if err != nil {
		return nil, err
	}
	path, err := resolveCommand(r.cfg.Command[0], env, dir)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, r.cfg.Command[1:]...)
	cmd.Dir, cmd.Env = dir, env
	return cmd, nil
}

// stop sends SIGTERM to the trainer's group and waits for it until
// deadline, then kills the group. It reports whether it had to kill.
func (t *trainer) stop(deadline time.Time) (killed bool) {
	t.signal(syscall.SIGTERM)
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case <-t.done:
		return false
	case <-timer.C:
		t.kill()
		<-t.done
		return true
	}
}

// kill sends SIGKILL to the trainer's whole group.
func (t *trainer) kill() { t.signal(syscall.SIGKILL) }

func (t *trainer) signal(sig syscall.Signal) {
	// The group may be gone already (ESRCH); there is nothing to do then.
	_ = syscall.Kill(-t.cmd.Process.Pid, sig)
}

// exitCode is the trainer's exit status, shell style: 128+n for signal n.
// It is valid once done is closed.
func (t *trainer) exitCode() int {
	ps := t.cmd.ProcessState
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
