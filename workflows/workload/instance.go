package workload

import "time"

// InstanceRef is the instance a run holds now.
type InstanceRef struct {
	ID           string    `json:"id"`
	Offering     string    `json:"offering"`
	Market       string    `json:"market"`
	Zone         string    `json:"zone"`
	PricePerHour float64   `json:"price_per_hour"`
	Since        time.Time `json:"since"`
}

// PreemptionInfo describes the latest preemption.
type PreemptionInfo struct {
	Time           time.Time `json:"time"`
	InstanceID     string    `json:"instance_id"`
	Zone           string    `json:"zone"`
	AtStep         int64     `json:"at_step"`
	CheckpointStep int64     `json:"checkpoint_step"`
	WithNotice     bool      `json:"with_notice"`
}

// RecoveryInfo describes the latest resume on a replacement instance.
type RecoveryInfo struct {
	ReplacementAt   time.Time `json:"replacement_at"`
	ResumedAt       time.Time `json:"resumed_at"`
	ResumedFromStep int64     `json:"resumed_from_step"`
	InstanceID      string    `json:"instance_id"`
}
