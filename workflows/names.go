// Package workflows holds refuel's deterministic orchestration: the story
// of a training run, of the janitor and of an injected interruption. Side
// effects happen only in activities; decisions come from pkg/ functions.
package workflows

import (
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
)

// Names in the external contract (design section 3). Add, never rename.
const (
	TaskQueue = "refuel"

	TrainingRunName = "TrainingRun"
	SignalPause     = "pause"
	SignalResume    = "resume"
	UpdatePriority  = "set-priority"
	QueryStatus     = "status"
	// SignalProgress carries activities.Progress from a run's node agent.
	SignalProgress = "progress"

	InferenceServiceName = "InferenceService"
	// SignalMetrics carries autoscale.Metrics: a service's observed load.
	SignalMetrics = "metrics"

	InjectInterruptionName = "InjectInterruption"
	JanitorName            = "Janitor"
)

// Search attributes operators filter runs by in the Web UI and CLI.
var (
	AttrTeam     = temporal.NewSearchAttributeKeyKeyword("RefuelTeam")
	AttrTier     = temporal.NewSearchAttributeKeyKeyword("RefuelTier")
	AttrPriority = temporal.NewSearchAttributeKeyInt64("RefuelPriority")
	AttrState    = temporal.NewSearchAttributeKeyKeyword("RefuelState")
	AttrMarket   = temporal.NewSearchAttributeKeyKeyword("RefuelMarket")
	AttrCostUSD  = temporal.NewSearchAttributeKeyFloat64("RefuelCostUSD")
)

// SearchAttributeTypes are the attributes above with their types, as the
// dev server and `starter setup` register them.
var SearchAttributeTypes = map[string]enums.IndexedValueType{
	AttrTeam.GetName():     enums.INDEXED_VALUE_TYPE_KEYWORD,
	AttrTier.GetName():     enums.INDEXED_VALUE_TYPE_KEYWORD,
	AttrPriority.GetName(): enums.INDEXED_VALUE_TYPE_INT,
	AttrState.GetName():    enums.INDEXED_VALUE_TYPE_KEYWORD,
	AttrMarket.GetName():   enums.INDEXED_VALUE_TYPE_KEYWORD,
	AttrCostUSD.GetName():  enums.INDEXED_VALUE_TYPE_DOUBLE,
}
