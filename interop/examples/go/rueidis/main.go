package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"strconv"

	"github.com/redis/rueidis"
)

func main() {
	url := os.Getenv("FLAKED_URL")
	if url == "" {
		url = "redis://127.0.0.1:7379"
	}
	opt, err := rueidis.ParseURL(url)
	if err != nil {
		log.Fatal(err)
	}
	c, err := rueidis.NewClient(opt)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	id, err := c.Do(ctx, c.B().Arbitrary("NEXTID").Build()).AsUint64()
	if err != nil {
		log.Fatal(err)
	}
	ids, err := c.Do(ctx, c.B().Arbitrary("NEXTIDS", "100").Build()).AsIntSlice()
	if err != nil {
		log.Fatal(err)
	}
	parts, err := c.Do(ctx, c.B().Arbitrary("PARSE", strconv.FormatUint(id, 10)).Build()).ToArray()
	if err != nil {
		log.Fatal(err)
	}
	machine, _ := parts[3].AsInt64() // time, tick, sequence, machine, mode
	fmt.Println(id, len(ids), machine)
}
