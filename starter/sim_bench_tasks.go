package main

import (
	"fmt"
	"io"
	"runtime"
	"sort"
	"sync"
	"time"

	"refuel/pkg/policy"
)

// benchTask is one replay of the bench: one policy on one window.
type benchTask struct {
	// weight is about how long the replay takes, to start the longest
	// first: the window's ticks, its zones, and the policy's work per tick.
	weight float64
	run    func() error
}

// replayWeight is the weight of replaying p over a window of ticks ticks
// in zones zones. The optimum searches every progress at every tick and
// refuel solves its plans as its model changes, so both take longer than
// the baselines by about these factors on the bench's traces.
func replayWeight(p policy.Name, ticks, zones int) float64 {
	w := float64(ticks * zones)
	switch p {
	case policy.Optimal:
		return 4 * w
	case policy.Refuel:
		return 3 * w
	}
	return w
}

// runBenchTasks runs the tasks on every core, the heaviest first, so that
// no core is left idle while a long replay started last finishes.
// Errors name their task; the first is returned after all have run.
func runBenchTasks(tasks []benchTask, stderr io.Writer) error {
	sort.SliceStable(tasks, func(i, j int) bool { return tasks[i].weight > tasks[j].weight })
	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		first error
		done  int
		next  = make(chan benchTask)
		began = time.Now()
		every = max(1, len(tasks)/10)
	)
	for range runtime.NumCPU() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for t := range next {
				err := t.run()
				mu.Lock()
				if err != nil && first == nil {
					first = err
				}
				done++
				if done%every == 0 || done == len(tasks) {
					fmt.Fprintf(stderr, "sim-bench: %d/%d replays (%s)\n", done, len(tasks), time.Since(began).Round(time.Second))
				}
				mu.Unlock()
			}
		}()
	}
	for _, t := range tasks {
		next <- t
	}
	close(next)
	wg.Wait()
	return first
}
