package coord_test

import (
	"context"
	"errors"
	"log"

	"github.com/sony/sonyflake/v2"

	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/redisurl"
)

// The registry as sonyflake's MachineID and CheckMachineID hooks: the
// machine ID is leased in Redis and renewed until Close. sonyflake cannot
// stop at a reservation, so a process paused longer than the lease TTL
// can collide with the next owner of its ID; flaked's own generator
// (package node) cannot. The fleet's registry is made once, by `flaked
// init` or Init, before its first process. (Not run by go test: it needs
// a Redis.)
func ExampleRegistry_Sonyflake() {
	ctx := context.Background()
	rdb, err := redisurl.NewClient("redis://127.0.0.1:6379")
	if err != nil {
		log.Fatal(err)
	}
	// Once per fleet (ErrRegistryExists after that). It records a
	// possible loss and waits until Redis grants past it (1 s); the
	// sonyflake hooks' first claim then waits for that floor (the horizon
	// and a second), flaked's generators start at it at once.
	if _, err := coord.Init(ctx, rdb, coord.Options{}); err != nil && !errors.Is(err, coord.ErrRegistryExists) {
		log.Fatal(err)
	}
	reg, err := coord.NewRegistry(rdb, coord.Options{})
	if err != nil {
		log.Fatal(err)
	}
	h := reg.Sonyflake(ctx)
	defer h.Close(ctx)

	sf, err := sonyflake.New(sonyflake.Settings{MachineID: h.MachineID, CheckMachineID: h.CheckMachineID})
	if err != nil {
		log.Fatal(err)
	}
	id, err := sf.NextID()
	if err != nil {
		log.Fatal(err)
	}
	log.Println(id)
}
