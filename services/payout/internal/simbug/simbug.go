//go:build !simbug

// Package simbug plants known faults in the payout service for the seeded
// simulation to catch (issue 60; docs/architecture.md, "The
// simulation"). Only a build with the simbug tag plants one, the one
// SIMBUG names; in every other build Planted is a constant false, and the
// compiler drops the faulty branches.
package simbug

// Planted reports whether the fault named is planted: never, in this
// build.
func Planted(string) bool { return false }
