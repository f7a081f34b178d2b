package seq

import (
	"errors"
	"fmt"

	"github.com/flaked/flaked/internal/replwait"
)

// The fleet's split-brain rule, the same as for leases and counter
// segments (coord/doc.go, Split brain): a segment is used only after
// WAIT, sent on the same connection right after seq.lua, reports as many
// replicas as the script says are needed (the fleet's high-water mark,
// replicas.lua, or Options.MinReplicas when higher). A grant that is not
// acknowledged is not used: its values are a gap, never a reuse, and an
// old master cut off from its replicas cannot have its grants used while
// the promoted replica grants the same values.

// WaitTimeout bounds the WAIT after a grant: no caller waits much longer
// for an acknowledgement, and a master that cannot get one fails closed.
const WaitTimeout = replwait.DefaultTimeout

// ErrNotAcknowledged is wrapped when a segment was granted but not
// acknowledged by enough replicas within WaitTimeout.
var ErrNotAcknowledged = errors.New("segment not acknowledged by the replicas")

// seqNeedAt is where an OK reply of seq.lua ("next") holds the replicas
// it needs, followed by the replicas listed.
const seqNeedAt = 5

// runGrant runs seq.lua ("next") with its WAIT (internal/replwait). A
// grant that is not used leaves its values as a gap.
func (s *Sequences) runGrant(keys []string, argv []any) ([]any, error) {
	res, _, err := s.wait.Run(s.ctx, s.rdb, script, keys, argv, seqNeedAt, WaitTimeout)
	if errors.Is(err, replwait.ErrNotReplicated) {
		s.unacked.Add(1)
		return nil, fmt.Errorf("%w: %w", ErrNotAcknowledged, err)
	}
	return res, err
}
