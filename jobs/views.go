package jobs

// View is a query of the Web UI's workflow list (or of temporal workflow
// list --query) that shows one side of refuel's state.
type View struct {
	Name  string `json:"name"`
	Query string `json:"query"`
}

// current leaves out the runs that continued as new: each generation of
// a long run, a service or the pool is a row of the list otherwise.
const current = ` AND ExecutionStatus!="ContinuedAsNew"`

// Views are the list views `starter ui` prints, in the order an operator
// looks: the runs, what waits, what failed, the services, everything but
// the janitor. RefuelState of a waiting run names what it waits on
// ("waiting-for-capacity:no-capacity"), and of a failed one its class
// ("failed:checkpoint"), hence the prefixes.
var Views = []View{
	{"training runs", `WorkflowType="TrainingRun"` + current},
	{"runs training now", `WorkflowType="TrainingRun" AND RefuelState="running"` + current},
	{"runs waiting for capacity", `WorkflowType="TrainingRun" AND (RefuelState STARTS_WITH "waiting-for-capacity" OR RefuelState IN ("queued","preempted","acquiring"))` + current},
	{"runs paused or over budget", `WorkflowType="TrainingRun" AND RefuelState IN ("paused","over-budget")` + current},
	{"runs that failed", `WorkflowType="TrainingRun" AND RefuelState STARTS_WITH "failed"`},
	{"inference services", `WorkflowType="InferenceService"` + current},
	{"development environments", `WorkflowType="DevEnvironment"` + current},
	{"refuel without the janitor", `WorkflowType!="Janitor"` + current},
	{"one team's runs and services (edit the team)", `RefuelTeam="nlp"` + current},
}
