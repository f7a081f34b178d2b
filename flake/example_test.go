package flake_test

import (
	"fmt"
	"log"

	"github.com/flaked/flaked/flake"
)

// A generator on its own: the zero Settings are the defaults (39 bits of
// 10 ms ticks since 2025-01-01 UTC, 8 bits of sequence, 16 bits of machine
// ID). On its own it trusts the caller to give every process a different
// machine ID; package node leases them from Redis instead.
func ExampleNew() {
	g, err := flake.New(flake.Settings{MachineID: 7})
	if err != nil {
		log.Fatal(err) // e.g. flake.ErrInvalidMachineID, naming the valid range
	}
	defer g.Close()

	a, err := g.NextID()
	if err != nil {
		log.Fatal(err)
	}
	b, _ := g.NextID()
	p := g.Layout().Decompose(a)
	fmt.Println("machine", p.MachineID, "increasing", a < b, "base32 length", len(flake.FormatBase32(a)))
	// Output: machine 7 increasing true base32 length 13
}
