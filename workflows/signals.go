package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"refuel/pkg/spec"
)

// signalHandler is one signal a workflow takes, with what taking it does.
// A workflow keeps its handlers in a fixed order, so signals that arrive
// together are taken in the same order on replay.
type signalHandler struct {
	ch   workflow.ReceiveChannel
	take func(workflow.Context, workflow.ReceiveChannel)
}

// onSignal is the handler of the named signal; the Web UI shows the
// signal with its description (see handlerDescriptions).
func onSignal(ctx workflow.Context, name string, take func(workflow.Context, workflow.ReceiveChannel)) signalHandler {
	ch := workflow.GetSignalChannelWithOptions(ctx, name, workflow.SignalChannelOptions{Description: handlerDescriptions[name]})
	return signalHandler{ch: ch, take: take}
}

// onSignalOf is the handler of the named signal carrying one T.
func onSignalOf[T any](ctx workflow.Context, name string, take func(workflow.Context, T)) signalHandler {
	return onSignal(ctx, name, func(ctx workflow.Context, c workflow.ReceiveChannel) {
		var v T
		c.Receive(ctx, &v)
		take(ctx, v)
	})
}

// addSignals makes sel take any of the handlers' signals.
func addSignals(ctx workflow.Context, sel workflow.Selector, hs []signalHandler) {
	for _, h := range hs {
		sel.AddReceive(h.ch, func(c workflow.ReceiveChannel, _ bool) { h.take(ctx, c) })
	}
}

// drainSignals takes every signal delivered and not yet taken, including
// those its handlers' work lets in, so that none is lost when the
// workflow continues as new. It reports whether it took any.
func drainSignals(ctx workflow.Context, hs []signalHandler) bool {
	took := false
	for more := true; more; {
		more = false
		for _, h := range hs {
			for h.ch.Len() > 0 {
				h.take(ctx, h.ch)
				more, took = true, true
			}
		}
	}
	return took
}

// validatePriority rejects a bad priority before anything is written to
// the run's history.
func validatePriority(_ workflow.Context, p int) error {
	if p < 0 || p > spec.MaxPriority {
		return fmt.Errorf("priority %d is out of range: use an integer from 0 (lowest) to %d (highest)", p, spec.MaxPriority)
	}
	return nil
}
