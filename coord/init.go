package coord

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/contract"
)

// ErrRegistryExists is returned by Init when the namespace already holds a
// registry or a fleet layout.
var ErrRegistryExists = errors.New("registry exists")

var initScript = redis.NewScript(contract.Init)

// Init makes the registry of a new fleet (flaked init): {ns}:meta under
// this Redis server's identity with no possible data loss, and the fleet
// layout, stored with no settle window. A registry made by a node's first
// claim instead cannot tell a new fleet from a Redis that lost everything,
// so its first IDs wait for the loss floor (about a horizon) and its
// layout settles for RenewInterval + 1s; after Init the first claim and
// the first counter segment start at once. Only for a fleet that has
// issued no ID in this namespace: a registry or layout that exists is
// refused (ErrRegistryExists), and after Redis lost its data the nodes
// restore the registry themselves, above the floors. It returns the
// registry's generation.
func Init(ctx context.Context, rdb redis.UniversalClient, o Options) (string, error) {
	o, err := o.withDefaults()
	if err != nil {
		return "", err
	}
	gen := newToken(o.Rand)
	keys, argv := contract.InitArgs{
		Keys: contract.NewKeys(o.Namespace), Generation: gen, Layout: o.Layout.String(),
		EpochUs: o.Layout.StartTime.UnixMicro(), TickUs: tickMicros(o.Layout), EventsMaxLen: o.EventsMaxLen,
		Host: o.Owner.Host, PID: o.Owner.PID, Identity: o.RedisIdentity,
	}.KeysArgv()
	v, err := initScript.Run(ctx, rdb, keys, argv...).Slice()
	if err != nil {
		err = contract.Explain(err)
		return "", fmt.Errorf("init registry %q: %w", o.Namespace, err)
	}
	if len(v) == 3 && v[0] == "EXISTS" {
		return "", fmt.Errorf("%w: %v holds %v: flaked init is only for a new fleet; a fleet whose Redis lost its data is restored by its nodes",
			ErrRegistryExists, v[1], v[2])
	}
	if len(v) != 3 || v[0] != "OK" {
		return "", fmt.Errorf("init registry %q: unexpected reply %v", o.Namespace, v)
	}
	return gen, nil
}
