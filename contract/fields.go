package contract

// The names the scripts write into Redis, for the Go code that reads or
// writes the same hashes and events (coord, audit). docs/design.md lists
// what each holds. TestFields_InScripts checks that every name the scripts
// are said to write is in their text; a name marked "Go only" is written
// only by Go code (its writer is named).

// Fields of {ns}:owner:<id> (Keys.Owner): who holds or held a machine ID.
// claim.lua writes them whole, renew.lua the heartbeat and mode (and the
// whole hash again when it went missing), release.lua the state.
const (
	OwnerHost       = "host"
	OwnerPID        = "pid"
	OwnerAddr       = "addr"
	OwnerVersion    = "version"
	OwnerMode       = "mode"
	OwnerToken      = "token" // the lease's owner token
	OwnerState      = "state" // StateLive or StateReleased
	OwnerStarted    = "started"
	OwnerHeartbeat  = "heartbeat"
	OwnerClaimed    = "claimed"
	OwnerFirstClaim = "first_claim"
	OwnerFloor      = "floor"
	OwnerReleased   = "released" // Redis ms of the release
	OwnerNode       = "node"     // the state file's node ID, "" without one
	OwnerFromToken  = "from_token"
)

// Values of OwnerState.
const (
	StateLive     = "live"
	StateReleased = "released"
)

// Fields of {ns}:meta (Keys.Meta), the registry's record: guard.lua keeps
// generation, server and the loss fields; flaked init makes it (init.lua).
const (
	MetaGeneration  = "generation"
	MetaCreatedMs   = "created_ms"
	MetaCreatedTick = "created_tick"
	MetaHorizon     = "horizon" // ticks: the fleet's reach
	MetaCounterLead = "counter_lead"
	MetaServer      = "server" // run_id:master_replid of the Redis that last wrote
	MetaLossMs      = "loss_ms"
	MetaLossID      = "loss_id"
	MetaReserved    = "reserved" // "1" once a claim wrote {ns}:reserved: its absence then is a loss (guard.lua)
	// MetaReplicas is the fleet's high-water mark of replicas: how many
	// must acknowledge a grant before it is used (replicas.lua). Raised by
	// the scripts, lowered by flaked audit replicas --set.
	MetaReplicas = "replicas"
	// MetaReplicaSet lists the replicas ("ip:port", comma separated) the
	// master has listed since it took the registry over: the mark is never
	// below their count (replicas.lua). A promotion and flaked audit
	// replicas --set start it anew.
	MetaReplicaSet = "replica_set"
)

// Types of the events in {ns}:events (Keys.Events), the value of their
// FieldType.
const (
	EventClaim          = "claim"
	EventReclaim        = "reclaim"  // the lease of this node's previous process (its state file's token)
	EventTakeover       = "takeover" // an ID whose owner never released it (crashed, or paused past its lease)
	EventRelease        = "release"
	EventRenewFail      = "renew_fail"
	EventClone          = "clone"
	EventFenced         = "fenced"
	EventLayoutRestored = "layout_restored"
	EventLayoutMismatch = "layout_mismatch"
	EventDataLoss       = "dataloss"
	EventCounterInit    = "counter_init"
	EventPrune          = "prune"
	EventInit           = "init"       // flaked init made the registry of a new fleet
	EventClockSkew      = "clock_skew" // Go only: coord's clock check
	EventMode           = "mode"       // Go only: node's mode switches
	EventReplicas       = "replicas"   // an operator's flaked audit replicas --set (mark.lua)
)

// Fields of the events. Every event has FieldType and FieldMachineID ("" for
// none); the scripts add who wrote it (host, pid, addr, and token for an
// owner's), then fields of its type (docs: audit.Event).
const (
	FieldType               = "type"
	FieldMachineID          = "mid"
	FieldHost               = "host"
	FieldPID                = "pid"
	FieldAddr               = "addr"
	FieldToken              = "token"
	FieldFloor              = "floor"
	FieldLossFloor          = "loss_floor"
	FieldPrevHost           = "prev_host"
	FieldPrevPID            = "prev_pid"
	FieldPrevAddr           = "prev_addr"
	FieldPrevToken          = "prev_token"
	FieldPrevState          = "prev_state"
	FieldMode               = "mode"
	FieldFenced             = "fenced"
	FieldNode               = "node"
	FieldLast               = "last"
	FieldReserved           = "reserved"
	FieldHeld               = "held"
	FieldReason             = "reason"
	FieldHolder             = "holder"
	FieldHolderHost         = "holder_host"
	FieldHolderPID          = "holder_pid"
	FieldDetail             = "detail"
	FieldLayout             = "layout"
	FieldStored             = "stored"
	FieldServer             = "server"
	FieldPreviousServer     = "previous_server"
	FieldGeneration         = "generation"
	FieldLossMs             = "loss_ms"
	FieldTick               = "tick"
	FieldValueTick          = "value_tick" // counter_init: the value the counter starts after
	FieldValueSeq           = "value_seq"
	FieldPreviousGeneration = "previous_generation" // Go only: coord's dataloss event of a claim
	FieldSkewMs             = "skew_ms"             // Go only: coord's clock_skew event
	FieldMaxSkewMs          = "max_skew_ms"         // Go only: coord's clock_skew event
	FieldFrom               = "from"                // Go only: node's mode event
	FieldTo                 = "to"                  // Go only: node's mode event
	FieldAtMs               = "at_ms"               // Go only: node's mode event, when it happened
	FieldReplicas           = "replicas"            // replicas event: the mark set
	FieldPrevious           = "previous"            // replicas event: the mark before
)
