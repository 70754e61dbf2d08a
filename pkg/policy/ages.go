package policy

import "time"

// AgeBuckets is how many age buckets Stretches keeps, and AgeBucketStart
// the age at which bucket b begins (the last bucket has no end). With a
// Stretches' Time and Ended they give the rate at which a stretch of each
// age ends, for readers outside the policy: the estimate samples spot
// stock from them.
const AgeBuckets = ageBuckets

// AgeBucketStart is the age at which bucket b of Stretches begins.
func AgeBucketStart(b int) time.Duration { return bucketStart(b) }
