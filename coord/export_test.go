package coord

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// InitNoWait runs init.lua as Init does, without waiting out the loss
// floor it records: the registry as a node restores it after Redis lost
// everything, for the tests of those floors.
func InitNoWait(ctx context.Context, rdb redis.UniversalClient, o Options) error {
	o, err := o.withDefaults()
	if err != nil {
		return err
	}
	_, _, err = initRegistry(ctx, rdb, o)
	return err
}
