package sim

import "refuel/pkg/capacity"

// EC2 error codes the sim puts on capacity.Error.Code, so the same failure
// reads the same through the Provider and through the EC2 endpoint.
const (
	CodeInsufficientCapacity = "InsufficientInstanceCapacity" // no-capacity
	CodeSpotMaxPriceTooLow   = "SpotMaxPriceTooLow"           // price
	CodeMaxSpotInstances     = "MaxSpotInstanceCountExceeded" // quota
	CodeVcpuLimitExceeded    = "VcpuLimitExceeded"            // quota
	CodeUnsupported          = "Unsupported"                  // spec-mismatch
	CodeRequestLimitExceeded = "RequestLimitExceeded"         // throttled
	// CodeInvalidParameterValue, naming the instance type, is a type the
	// sim does not sell anywhere: configuration.
	CodeInvalidParameterValue = "InvalidParameterValue" // config
	// CodeLaunchFailure is EC2's state reason for an instance that never
	// came up; the sim's init failures carry it.
	CodeLaunchFailure = "Server.InternalError"
)

// StateReason says why an instance ended (or is ending), in EC2's words.
type StateReason struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// The reasons an instance ends.
var (
	ReasonSpotTermination  = StateReason{"Server.SpotInstanceTermination", "Server.SpotInstanceTermination: Spot instance termination"}
	ReasonUserShutdown     = StateReason{"Client.UserInitiatedShutdown", "Client.UserInitiatedShutdown: User initiated shutdown"}
	ReasonInstanceShutdown = StateReason{"Client.InstanceInitiatedShutdown", "Client.InstanceInitiatedShutdown: Instance initiated shutdown"}
	ReasonLaunchFailure    = StateReason{CodeLaunchFailure, "Server.InternalError: Internal error on launch"}
)

// throttled is the refusal of one API call.
func throttled() *capacity.Error {
	return capacity.NewError(capacity.Throttled, capacity.Offering{Provider: ProviderName}, CodeRequestLimitExceeded, "Request limit exceeded.")
}
