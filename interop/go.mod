module github.com/flaked/flaked/interop

go 1.24.9

replace github.com/flaked/flaked => ../

require (
	github.com/flaked/flaked v0.0.0-00010101000000-000000000000
	github.com/redis/go-redis/v9 v9.22.0
	github.com/redis/rueidis v1.0.74
)

require (
	github.com/alicebob/miniredis/v2 v2.40.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/yuin/gopher-lua v1.1.1 // indirect
	go.uber.org/atomic v1.11.0 // indirect
	golang.org/x/sys v0.39.0 // indirect
)
