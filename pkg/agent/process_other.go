//go:build unix && !linux

package agent

import "syscall"

// sysProcAttr puts the trainer in its own process group. Outside Linux
// there is no parent-death signal: a trainer may outlive a crashed agent.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
