package apis

// Group prefixes every annotation and label key karpfunc owns. Every
// karpfunc.azure.com/* key is declared here and nowhere else; the Azure tag
// names derived from them (pkg/azure TagManagedBy, TagCreated) replace "/"
// with "_", as Azure tag names may not contain "/".
const Group = "karpfunc.azure.com"

// Ownership.
const (
	// AnnotationManagedBy marks a NodeClaim karpfunc created (value
	// ownership.Value); see pkg/ownership.
	AnnotationManagedBy = Group + "/managed-by"
)

// NodeClaim names (pkg/claimnames).
const (
	// AnnotationNodeClaimGeneration is the name counter on its Lease, and
	// on a NodeClaim the generation its name was derived with.
	AnnotationNodeClaimGeneration = Group + "/nodeclaim-generation"
)

// Launches (pkg/provisioning).
const (
	// AnnotationLaunch records on a NodeClaim the launch in progress (JSON:
	// the offering, the phase, the attempts, the next look).
	AnnotationLaunch = Group + "/launch"
)

// Disruption commands (pkg/disruption/live). A replacement NodeClaim
// carries its command's record (live.Record: the first five keys); a
// candidate awaiting its command's validation carries
// AnnotationDisruptionValidating.
const (
	// AnnotationDisruptionCommand is the command's id (a hash of its method
	// and its candidates' UIDs).
	AnnotationDisruptionCommand = Group + "/disruption-command"
	// AnnotationDisruptionCandidates lists the candidates,
	// "name=uid,name=uid".
	AnnotationDisruptionCandidates = Group + "/disruption-candidates"
	// AnnotationDisruptionReplacements is how many replacements the command
	// has (a decimal integer, at least 1).
	AnnotationDisruptionReplacements = Group + "/disruption-replacements"
	// AnnotationDisruptionReason is the command's disruption reason
	// (Karpenter's: Underutilized, Drifted, ...).
	AnnotationDisruptionReason = Group + "/disruption-reason"
	// AnnotationDisruptionMethod is the command's method (its events name a
	// rebalancing consolidation as such).
	AnnotationDisruptionMethod = Group + "/disruption-method"
	// AnnotationDisruptionValidating, on a command's candidates, is when
	// the command's validation is due (RFC 3339): until then, and a grace
	// period after, passes start no other command.
	AnnotationDisruptionValidating = Group + "/disruption-validating"
)

// Events.
const (
	// ReportingControllerPrefix prefixes the component name in the
	// reportingController of the events karpfunc writes.
	ReportingControllerPrefix = Group + "/"
)
