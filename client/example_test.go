package client_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/flaked/flaked/client"
	"github.com/flaked/flaked/node"
	"github.com/flaked/flaked/server"
)

// startDaemon runs a standalone flaked daemon (an in-process node on its
// embedded store, as `flaked serve` without --redis) on a loopback port,
// so the examples run anywhere. stop shuts it down.
func startDaemon() (addr string, stop func()) {
	ctx := context.Background()
	n, err := node.New(ctx, node.Options{})
	if err != nil {
		panic(err)
	}
	srv, err := server.New(n, server.Options{})
	if err != nil {
		panic(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	return ln.Addr().String(), func() {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
		_ = n.Close(ctx)
	}
}

func Example() {
	addr, stop := startDaemon()
	defer stop()

	c, err := client.New(client.Options{Addrs: []string{addr}})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx := context.Background()

	id, err := c.NextID(ctx)
	if err != nil {
		panic(err)
	}
	ids, err := c.NextIDs(ctx, 3)
	if err != nil {
		panic(err)
	}
	fmt.Println("IDs increase:", id < ids[0] && ids[0] < ids[1] && ids[1] < ids[2])

	p, err := c.Parse(id)
	if err != nil {
		panic(err)
	}
	fmt.Println("mode:", p.Mode)
	fmt.Println("issued within the last minute:", time.Since(p.Time) < time.Minute)
	// Output:
	// IDs increase: true
	// mode: flake
	// issued within the last minute: true
}

func ExampleNewFromURL() {
	addr, stop := startDaemon()
	defer stop()

	// Several daemons are listed with commas; prefetch serves NextID from
	// batches of 500 fetched in the background, none older than 1s.
	c, err := client.NewFromURL("flaked://" + addr + "?prefetch=500&max_age=1s&read_timeout=500ms")
	if err != nil {
		panic(err)
	}
	defer c.Close()

	seen := map[uint64]bool{}
	for range 2000 {
		id, err := c.NextID(context.Background())
		if err != nil {
			panic(err)
		}
		seen[id] = true
	}
	fmt.Println("distinct IDs:", len(seen))
	fmt.Println("all from prefetched batches:", c.Stats().Prefetched >= 2000)
	// Output:
	// distinct IDs: 2000
	// all from prefetched batches: true
}

func ExampleClient_Parse() {
	addr, stop := startDaemon()
	defer stop()
	c, err := client.New(client.Options{Addrs: []string{addr}})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	// The daemon runs the default layout: 39 bits of 10 ms ticks since
	// 2025-01-01, 8 bits of sequence, 16 of machine ID.
	p, err := c.Parse(100091528478916650)
	if err != nil {
		panic(err)
	}
	fmt.Println(p.Time.Format(time.RFC3339Nano), "tick", p.Tick, "sequence", p.Sequence, "machine", p.MachineID, p.Mode)
	// Output:
	// 2026-11-22T12:00:00Z tick 5965920000 sequence 3 machine 42 flake
}

func ExampleError() {
	// Nothing listens on port 1 of the loopback.
	c, err := client.New(client.Options{Addrs: []string{"127.0.0.1:1"}})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	_, err = c.NextID(context.Background())
	var ce *client.Error
	if errors.As(err, &ce) {
		for _, a := range ce.Attempts {
			fmt.Println("tried", a.Addr)
		}
	}
	fmt.Println("no daemon answered:", errors.Is(err, client.ErrNoDaemon))
	// Output:
	// tried 127.0.0.1:1
	// no daemon answered: true
}
