package agent

import "syscall"

// sysProcAttr puts the trainer in its own process group and has the kernel
// kill it if the agent dies, so a trainer never runs unsupervised.
// Pdeathsig follows the OS thread that started the trainer; Go keeps that
// thread alive as long as the agent runs.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
