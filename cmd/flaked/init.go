package main

import (
	"context"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/flaked/flaked/coord"
)

// initCommand is flaked init: the registry of a new fleet, made before its
// first node starts, so the first IDs need no loss floor and no layout
// settle window (coord.Init).
func initCommand() *cli.Command {
	return &cli.Command{
		Name:  "init",
		Usage: "make the registry of a new fleet, so its first nodes issue at once",
		Description: "A node that finds no registry cannot tell a new fleet from a Redis that lost everything, so\n" +
			"it makes one with both guards of a loss: its first IDs wait for the loss floor (about 4 s) and\n" +
			"its layout settles for up to 3 s. Run flaked init once, with the fleet's layout flags, before\n" +
			"the first node of a NEW fleet (as etcd's --initial-cluster-state new): the registry is made\n" +
			"under this Redis server's identity with no possible loss, and the layout stored. It refuses\n" +
			"(status 1) a namespace that holds a registry or a layout. Never run it after Redis lost its\n" +
			"data under a running fleet: the nodes restore the registry themselves, above the floors that\n" +
			"keep their earlier IDs apart.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "redis", EnvVars: envVars("redis"), Required: true,
				Usage: "the fleet's Redis URL: redis://, rediss://, redis-sentinel://host:port[,..]/<master>, redis-cluster://host:port[,..]"},
			&cli.StringFlag{Name: "namespace", Value: coord.DefaultNamespace, EnvVars: envVars("namespace"),
				Usage: "the fleet's namespace (keys {ns}:...)"},
		}, layoutFlags()...),
		Action: func(c *cli.Context) error {
			layout, err := layoutFromFlags(c)
			if err != nil {
				return err
			}
			rdb, err := redisClient(c.String("redis"))
			if err != nil {
				return err
			}
			defer rdb.Close()
			ctx, cancel := context.WithTimeout(c.Context, 10*time.Second)
			defer cancel()
			gen, err := coord.Init(ctx, rdb, coord.Options{Namespace: c.String("namespace"), Layout: layout})
			if err != nil {
				return err
			}
			fmt.Fprintf(c.App.Writer, "registry of namespace %s made for a new fleet: generation %s, layout %s\n",
				c.String("namespace"), gen, layout)
			return nil
		},
	}
}
