package coord

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/clock"
	"github.com/flaked/flaked/contract"
)

// ErrRegistryExists is returned by Init when the namespace already holds a
// registry or a fleet layout.
var ErrRegistryExists = errors.New("registry exists")

var initScript = redis.NewScript(contract.Init)

// Init makes the registry of a fleet (flaked init): {ns}:meta and the
// fleet layout, which no node's claim or counter call makes. A node that
// finds none cannot tell a new fleet from a Redis that lost everything, so
// it is refused (ErrNoRegistry) unless it ran under the registry before,
// and then restores it; a misconfigured node is never adopted as the
// fleet's layout. The registry is made with a possible loss now, as a
// restored one is: Init cannot tell a new namespace from one whose Redis
// lost everything a moment ago while its nodes still issue. It waits until
// Redis grants past that loss floor (loss + contract.RedisSkew +
// Options.Horizon): Redis grants up to its TIME + the horizon, so that is
// the skew, 1 s. The first claims after it then issue at once, their
// generators starting at the floor ahead of the clock; a claim that must
// start below the clock (the sonyflake hooks) waits for it. A registry or
// layout that exists is refused (ErrRegistryExists). Options.Horizon
// becomes the fleet's horizon, which caps every reservation: nodes with a
// longer reach are held to it, so init takes the reach of the fleet's
// nodes. It returns the registry's generation.
func Init(ctx context.Context, rdb redis.UniversalClient, o Options) (string, error) {
	o, err := o.withDefaults()
	if err != nil {
		return "", err
	}
	gen, lossMs, err := MakeRegistry(ctx, rdb, o)
	if err != nil {
		return "", err
	}
	// The loss floor of claim.lua, less the horizon: the Redis tick from
	// which renew.lua grants past it.
	l := o.Layout
	from := l.Tick(time.UnixMilli(lossMs).Add(contract.RedisSkew)) + 1
	for {
		t, err := rdb.Time(ctx).Result()
		if err != nil {
			return "", fmt.Errorf("init registry %q: made (generation %s), waiting for Redis to grant past its loss floor: %w", o.Namespace, gen, err)
		}
		left := l.TickTime(from).Sub(t)
		if left <= 0 {
			return gen, nil
		}
		if err := clock.Sleep(ctx, o.Clock, min(left, 100*time.Millisecond)); err != nil {
			return "", fmt.Errorf("init registry %q: made (generation %s), waiting for Redis to grant past its loss floor: %w", o.Namespace, gen, err)
		}
	}
}

// MakeRegistry is Init without its wait: it runs init.lua and returns the
// registry's generation and the Redis time (ms) of the loss it records.
// Claims are granted only above that loss floor, which Init waits out;
// the simulator, whose fleets start at once on a registry made before
// them, clears it instead. The generation is drawn from Options.Rand.
func MakeRegistry(ctx context.Context, rdb redis.UniversalClient, o Options) (generation string, lossMs int64, err error) {
	if o, err = o.withDefaults(); err != nil {
		return "", 0, err
	}
	gen := newToken(o.Rand)
	keys, argv := contract.InitArgs{
		Keys: contract.NewKeys(o.Namespace), Generation: gen, Layout: o.Layout.String(),
		EpochUs: o.Layout.StartTime.UnixMicro(), TickUs: tickMicros(o.Layout), Horizon: o.horizonTicks(),
		EventsMaxLen: o.EventsMaxLen, Host: o.Owner.Host, PID: o.Owner.PID, Identity: o.RedisIdentity,
	}.KeysArgv()
	v, err := initScript.Run(ctx, rdb, keys, argv...).Slice()
	if err != nil {
		err = contract.Explain(err)
		return "", 0, fmt.Errorf("init registry %q: %w", o.Namespace, err)
	}
	if len(v) == 3 && v[0] == "EXISTS" {
		return "", 0, fmt.Errorf("%w: %v holds %v: flaked init is only for a namespace without a registry; a fleet whose Redis lost its data is restored by its nodes",
			ErrRegistryExists, v[1], v[2])
	}
	if len(v) != 4 || v[0] != "OK" {
		return "", 0, fmt.Errorf("init registry %q: unexpected reply %v", o.Namespace, v)
	}
	return gen, toInt64(v[3]), nil
}
