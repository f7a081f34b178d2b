// Package idtest has what the tests of the ID generators share: checks on
// the IDs they issued (unique, strictly increasing), which print every
// offending ID decoded under its layout (tick, sequence, machine ID), a
// context bounded by the test, a buffer for a log read while it is
// written, and a go-redis logger for tests that take Redis away on
// purpose.
//
// It imports flake, so package flake's own tests use it from package
// flake_test, never from package flake.
package idtest
