package tests

import (
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/internal/idtest"
)

// Two daemons on one Redis, clients in RESP3 and RESP2 running
// transactions (go-redis's TxPipelined: MULTI/EXEC) of NEXTID and NEXTIDS,
// as integers and as strings, and discarding others: every ID received is
// unique, each transaction's are increasing, and the daemons issued
// exactly the IDs received (INFO ids_issued): none for the discarded ones.
func TestDaemon_Transactions_RESP3_UniqueAndNoneDiscarded(t *testing.T) {
	srv := redisServer(t, false)
	ds := fleet(t, 2, srv.URL(), "--machine-ids", "2")
	var (
		mu  sync.Mutex
		all []uint64
		wg  sync.WaitGroup
	)
	for w := range 8 {
		d := ds[w%2]
		c := redis.NewClient(&redis.Options{Addr: d.Addr(), Protocol: 2 + w%2, MaxRetries: -1, PoolSize: 1})
		t.Cleanup(func() { c.Close() })
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				ids, err := transaction(t, c, i%5 == 4)
				if err != nil {
					t.Error(err)
					return
				}
				idtest.Increasing(t, defaultLayout(), d.Name, ids)
				mu.Lock()
				all = append(all, ids...)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	idtest.Unique(t, defaultLayout(), all)
	want := 8 * 40 * 32 // 40 of 50 transactions executed, 32 IDs each
	issued := 0
	for _, d := range ds {
		info, err := d.Info(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(info["ids_issued"])
		issued += n
	}
	if len(all) != want || issued != want {
		t.Fatalf("%d IDs received, %d issued, want %d", len(all), issued, want)
	}
}

// transaction runs MULTI, NEXTID, NEXTIDS 30 STRING, NEXTID STRING, then
// EXEC, or DISCARD when discard is set, and returns the IDs.
func transaction(t *testing.T, c *redis.Client, discard bool) ([]uint64, error) {
	ctx := ctxT(t)
	conn := c.Conn()
	defer conn.Close()
	if discard {
		_, err := conn.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.Do(ctx, "MULTI")
			p.Do(ctx, "NEXTID")
			p.Do(ctx, "NEXTIDS", 30, "STRING")
			p.Do(ctx, "DISCARD")
			return nil
		})
		return nil, err
	}
	cmds, err := conn.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Do(ctx, "NEXTID")
		p.Do(ctx, "NEXTIDS", 30, "STRING")
		p.Do(ctx, "NEXTID", "STRING")
		return nil
	})
	if err != nil {
		return nil, err
	}
	var ids []uint64
	for _, cmd := range cmds {
		v, err := cmd.(*redis.Cmd).Result()
		if err != nil {
			return nil, err
		}
		list, ok := v.([]any)
		if !ok {
			list = []any{v}
		}
		for _, e := range list {
			switch e := e.(type) {
			case int64:
				ids = append(ids, uint64(e))
			case string:
				id, err := strconv.ParseUint(e, 10, 64)
				if err != nil {
					return nil, err
				}
				ids = append(ids, id)
			default:
				return nil, fmt.Errorf("ID of type %T", e)
			}
		}
	}
	return ids, nil
}
