// Package model holds the Promela model of flaked's coordination protocol
// (flaked.pml, checked by scripts/model with SPIN) and the test that ties
// it to the code: replay_test.go runs SPIN's random simulations of the
// model and replays every script call they print against the real Lua
// scripts in the simulated Redis (internal/simredis), comparing each
// outcome. docs/model.md describes both.
package model
