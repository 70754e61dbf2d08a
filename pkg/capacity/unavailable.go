package capacity

import (
	"sync"
	"time"
)

// DefaultUnavailableTTL is how long an offering that just ran out of stock
// is skipped (Karpenter uses the same three minutes).
const DefaultUnavailableTTL = 3 * time.Minute

// UnavailableCache remembers offerings that just failed with no capacity,
// across runs, so the next request does not try them again at once. The
// zero value is not usable; call NewUnavailableCache.
type UnavailableCache struct {
	mu    sync.Mutex
	ttl   time.Duration
	now   func() time.Time
	until map[string]time.Time
}

// NewUnavailableCache returns a cache with the given TTL (0 means the
// default). now may be nil for the wall clock.
func NewUnavailableCache(ttl time.Duration, now func() time.Time) *UnavailableCache {
	if ttl <= 0 {
		ttl = DefaultUnavailableTTL
	}
	if now == nil {
		now = time.Now
	}
	return &UnavailableCache{ttl: ttl, now: now, until: map[string]time.Time{}}
}

// MarkUnavailable records that o just had no capacity.
func (c *UnavailableCache) MarkUnavailable(o Offering) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.until[o.Key()] = c.now().Add(c.ttl)
}

// IsUnavailable reports whether o failed for lack of capacity within the TTL.
func (c *UnavailableCache) IsUnavailable(o Offering) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.until[o.Key()]
	if !ok {
		return false
	}
	if !c.now().Before(t) {
		delete(c.until, o.Key())
		return false
	}
	return true
}
