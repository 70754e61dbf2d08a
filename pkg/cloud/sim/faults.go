package sim

// FailNextInits makes the next n launches fail their initialisation: the
// instance is placed, then never becomes ready and terminates with
// ReasonLaunchFailure (Acquire reports an init-failure).
func (c *Cloud) FailNextInits(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failInits = n
}

// ThrottleNext makes the next n API calls fail with RequestLimitExceeded.
func (c *Cloud) ThrottleNext(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.throttle = n
}

// APICall counts one call to the cloud's API against the injected
// throttling and the rate limit, and refuses it with a throttled
// *capacity.Error (RequestLimitExceeded) when either says so. Acquire
// counts itself; the EC2 endpoint counts every request.
func (c *Cloud) APICall() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.throttle > 0 {
		c.throttle--
		return throttled()
	}
	if c.limiter != nil && !c.limiter.AllowN(c.cfg.Now(), 1) {
		return throttled()
	}
	return nil
}
