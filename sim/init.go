package sim

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/flaked/flaked/contract"
	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/internal/simredis"
	"github.com/flaked/flaked/node"
)

// namespace is the simulated fleet's.
const namespace = "sim"

// initRegistry makes the fleet's registry before its first node starts,
// as `flaked init` does (coord.MakeRegistry: init.lua's {ns}:meta and
// layout, through the mutated scripts too, as a build with the bug
// would). The fleet is new, made well before its nodes start: its loss
// floor is cleared, as redistest.InitRegistry does (and coord.Init's wait
// would leave it), and the replica and the snapshot hold it, so a later
// failover or restart does not lose it. Only its nodes' claims, renewals
// and counters restore it after that (guard.lua): a process that never
// ran under it gets coord.ErrNoRegistry and is retried as any failed
// start.
func (r *run) initRegistry() error {
	d := r.redis
	srv := d.srv
	d.list(srv) // the master lists its replicas: init.lua's mark starts from them
	rdb := simredis.NewClient(func(_ context.Context, args []string) (any, error) {
		return srv.Do(r.mutate(args))
	})
	lay := r.layout
	// The horizon of the fleet's nodes, as the operator passes their
	// reach to flaked init.
	n0 := r.s.Nodes[0]
	horizon, err := node.Options{Registry: coord.Options{Layout: lay, MaxSkew: r.s.MaxSkew},
		MaxLead: n0.MaxLead, ReserveAhead: n0.ReserveAhead}.Horizon()
	if err != nil {
		return fmt.Errorf("init registry: %w", err)
	}
	// The generation comes from the seed: the run's own random draws stay
	// as they are.
	var gen [16]byte
	binary.BigEndian.PutUint64(gen[8:], r.s.Seed)
	ctx := context.Background()
	_, _, err = coord.MakeRegistry(ctx, rdb, coord.Options{Namespace: namespace, Layout: lay, Horizon: horizon,
		Owner: coord.Owner{Host: "operator", PID: 1}, Rand: bytes.NewReader(gen[:])})
	if err != nil {
		return err
	}
	if err := rdb.HSet(ctx, contract.NewKeys(namespace).Meta, contract.MetaLossMs, 0).Err(); err != nil {
		return fmt.Errorf("init registry: %w", err)
	}
	for _, h := range d.replicas() {
		d.sync(h)
	}
	d.save()
	return nil
}

// mutate is the command the simulated Redis runs for args: the mutated
// text of a script a mutation changes (Options.Mutation), else args.
func (r *run) mutate(args []string) []string {
	if r.mutants != nil && strings.EqualFold(args[0], "EVALSHA") {
		if text, ok := r.mutants[args[1]]; ok {
			return append([]string{"EVAL", text}, args[2:]...)
		}
	}
	return args
}
