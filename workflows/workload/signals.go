package workload

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"refuel/pkg/spec"
	"refuel/workflows"
)

// SignalHandler is one signal a workflow takes, with what taking it does.
// A workflow keeps its handlers in a fixed order, so signals that arrive
// together are taken in the same order on replay.
type SignalHandler struct {
	Ch   workflow.ReceiveChannel
	take func(workflow.Context, workflow.ReceiveChannel)
}

// OnSignal is the handler of the named signal; the Web UI shows the
// signal with its description (see HandlerDescriptions).
func OnSignal(ctx workflow.Context, name string, take func(workflow.Context, workflow.ReceiveChannel)) SignalHandler {
	ch := workflow.GetSignalChannelWithOptions(ctx, name, workflow.SignalChannelOptions{Description: workflows.HandlerDescriptions[name]})
	return SignalHandler{Ch: ch, take: take}
}

// OnSignalOf is the handler of the named signal carrying one T.
func OnSignalOf[T any](ctx workflow.Context, name string, take func(workflow.Context, T)) SignalHandler {
	return OnSignal(ctx, name, func(ctx workflow.Context, c workflow.ReceiveChannel) {
		var v T
		c.Receive(ctx, &v)
		take(ctx, v)
	})
}

// AddSignals makes sel take any of the handlers' signals.
func AddSignals(ctx workflow.Context, sel workflow.Selector, hs []SignalHandler) {
	for _, h := range hs {
		sel.AddReceive(h.Ch, func(c workflow.ReceiveChannel, _ bool) { h.take(ctx, c) })
	}
}

// DrainSignals takes every signal delivered and not yet taken, including
// those its handlers' work lets in, so that none is lost when the
// workflow continues as new. It reports whether it took any.
func DrainSignals(ctx workflow.Context, hs []SignalHandler) bool {
	took := false
	for more := true; more; {
		more = false
		for _, h := range hs {
			for h.Ch.Len() > 0 {
				h.take(ctx, h.Ch)
				more, took = true, true
			}
		}
	}
	return took
}

// ValidatePriority rejects a bad priority before anything is written to
// the run's history.
func ValidatePriority(_ workflow.Context, p int) error {
	if p < 0 || p > spec.MaxPriority {
		return fmt.Errorf("priority %d is out of range: use an integer from 0 (lowest) to %d (highest)", p, spec.MaxPriority)
	}
	return nil
}
