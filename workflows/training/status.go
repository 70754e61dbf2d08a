package training

import (
	"refuel/pkg/cost"
	"refuel/pkg/estimate"
	"refuel/workflows/workload"
)

// Status is the answer to the "status" query (docs/contracts.md); fields
// are only ever added. It is the run's record (RunRecord, what the run
// decides with and counts) and what is derived from the rest of its
// state when it is asked for (run.snapshot).
type Status struct {
	RunRecord

	Paused   bool                  `json:"paused"`
	Instance *workload.InstanceRef `json:"instance"`
	CostUSD  float64               `json:"cost_usd"`
	Attempt  int                   `json:"attempt"`
	// Nodes are a gang's nodes (resources.nodes above 1), by rank.
	Nodes []NodeStatus `json:"nodes,omitempty"`
	// NodesAsked is a gang's resources.nodes and NodesTraining how many
	// it holds now: fewer while an elastic gang is short of nodes (the
	// ledger's resizes say when it shrank and grew).
	NodesAsked    int `json:"nodes_asked,omitempty"`
	NodesTraining int `json:"nodes_training,omitempty"`
	// Cost breaks cost_usd down by market and pool, lost work included;
	// Ledger is every paid stretch of instance time behind it.
	Cost   cost.Breakdown `json:"cost"`
	Ledger cost.Ledger    `json:"ledger"`
	// Market is the run's account in market time, when it follows a
	// market with a clock of its own (the simulated cloud), or its latest
	// decision between spot and on-demand in wall time.
	Market *workload.MarketStatus `json:"market,omitempty"`
	// Admission is the run's place with the capacity pool, when one runs:
	// the yields the record counts, and what it holds from its grant. It
	// stands in for the record's PoolYields under the same name.
	Admission *workload.AdmissionStatus `json:"admission,omitempty"`
	// Estimate is what was estimated for the run when it was submitted
	// (`starter estimate`), and once it has ended how it turned out.
	Estimate *estimate.Submitted `json:"estimate,omitempty"`
}
