//go:build simbug

package simbug

import "os"

// The faults a simbug build can plant (SIMBUG=name):
//
//   - handover-abandoned: a hand-over whose answer was lost is taken as
//     not made (as code that commits the intent after the call has
//     nothing to retry from): the payout fails and its deposit is
//     refunded, though the provider may have it;
//   - refund-apart: a change's refunds are written after its
//     transaction commits, in one of their own;
//   - row-error-swallowed: a hand-over the provider failed is recorded as
//     made (the round swallows that row's error);
//   - confirmations-ignored: the watcher counts a transfer as soon as it
//     is mined, whatever confirmations its chain asks (a reorganisation
//     then takes away a deposit we counted).
var planted = os.Getenv("SIMBUG")

// Faults are the faults a simbug build can plant.
var Faults = []string{"handover-abandoned", "refund-apart", "row-error-swallowed", "confirmations-ignored"}

// Planted reports whether the fault named is planted.
func Planted(name string) bool { return planted == name }
