package controlplane

import (
	"context"

	"refuel/balancers"
	"refuel/pkg/balancer"
)

// startBalancers runs the host of the running services' balancers until
// the stack stops.
func (s *Stack) startBalancers(namespace string) error {
	m, err := balancer.NewMetrics(s.Metrics.Registry)
	if err != nil {
		return err
	}
	s.Balancers = balancers.New(balancers.Temporal{Client: s.Client, Namespace: namespace},
		balancers.Config{Host: s.cfg.Balancers.Host, Metrics: m, Log: s.log.Named("balancers")})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Balancers.Run(ctx)
	}()
	s.closers = append(s.closers, func() { cancel(); <-done })
	return nil
}
