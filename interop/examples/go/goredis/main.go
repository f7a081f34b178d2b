package main

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/redis/go-redis/v9"
)

func main() {
	url := os.Getenv("FLAKED_URL")
	if url == "" {
		url = "redis://127.0.0.1:7379"
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		log.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	ctx := context.Background()

	id, err := rdb.Do(ctx, "NEXTID").Uint64()
	if err != nil {
		log.Fatal(err)
	}
	ids, err := rdb.Do(ctx, "NEXTIDS", 100).Int64Slice()
	if err != nil {
		log.Fatal(err)
	}
	parts, err := rdb.Do(ctx, "PARSE", id).Slice() // time, tick, sequence, machine, mode
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(id, len(ids), parts[3])
}
