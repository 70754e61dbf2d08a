package main

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
)

// What a bench does to and reads of the machine it runs on, and the
// quantiles of its figures.

// busyCores starts n processes that each keep a core busy, and returns
// what stops them. Each spins only while the bench lives, so a bench
// killed outright leaves none behind.
func busyCores(n int) (stop func(), err error) {
	var procs []*exec.Cmd
	stop = func() {
		for _, p := range procs {
			_ = p.Process.Kill()
			_ = p.Wait()
		}
	}
	for range n {
		p := exec.Command("/bin/sh", "-c", "while kill -0 $PPID 2>/dev/null; do :; done")
		if err := p.Start(); err != nil {
			stop()
			return nil, fmt.Errorf("--busy-cores: %w", err)
		}
		procs = append(procs, p)
	}
	return stop, nil
}

// inParallel calls f(0..n-1) on up to width goroutines and returns the
// first error.
func inParallel(n, width int, f func(int) error) error {
	var wg sync.WaitGroup
	var first error
	var mu sync.Mutex
	next := make(chan int)
	for range min(width, n) {
		wg.Go(func() {
			for i := range next {
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}

// peakRSSMB is the process's peak resident set (VmHWM), in MB.
func peakRSSMB() float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}
