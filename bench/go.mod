module github.com/flaked/flaked/bench

go 1.24

replace github.com/flaked/flaked => ../

require (
	github.com/bwmarrin/snowflake v0.3.0
	github.com/flaked/flaked v0.0.0-00010101000000-000000000000
	github.com/redis/go-redis/v9 v9.22.0
	github.com/rs/zerolog v1.35.1
	github.com/sony/sonyflake v1.2.0
	github.com/sony/sonyflake/v2 v2.2.0
)

require (
	github.com/alicebob/miniredis/v2 v2.40.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/mattn/go-colorable v0.1.14 // indirect
	github.com/mattn/go-isatty v0.0.24 // indirect
	github.com/yuin/gopher-lua v1.1.1 // indirect
	go.uber.org/atomic v1.11.0 // indirect
	golang.org/x/sys v0.35.0 // indirect
)
