package client

import "github.com/redis/go-redis/v9"

// RedisOptions is the go-redis configuration the client uses for a
// daemon, so benchmarks can run their reference (INCR against
// redis-server) on an identically configured go-redis client.
func RedisOptions(addr string, o Options) (*redis.Options, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	return redisOptions(addr, &o), nil
}

// WithNEXTIDSPrefetch makes o's Prefetch use NEXTIDS batches even from
// daemons that have NEXTBLOCK: the mutex prefetch benchmarks compare
// blocks with.
func WithNEXTIDSPrefetch(o Options) Options {
	o.nextIDsPrefetch = true
	return o
}

// ExpireBlocks runs what the expiry timer of c's blocks runs when it
// fires: blocks older than MaxAge on c's clock are dropped.
func ExpireBlocks(c *Client) {
	c.bf.mu.Lock()
	c.bf.expireLocked()
	c.bf.mu.Unlock()
}

// MaxUnusable is how many blocks in a row may be dropped on arrival
// before NextID callers get the error.
const MaxUnusable = maxUnusable
