// Package model holds the Promela model of flaked's coordination protocol
// (flaked.pml, checked by scripts/model with SPIN) and the test that ties
// it to the code: replay_test.go runs SPIN's random simulations of the
// model and replays every script call they print against the real Lua
// scripts in the simulated Redis (internal/simredis), comparing each
// outcome, including who restores a registry Redis lost (a process that
// has run under it) and who is refused it (NOREGISTRY, LAYOUT).
// docs/model.md describes both, with the bounds and results of each run.
package model
