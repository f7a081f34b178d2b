package sim

import "slices"

// Exposure measures what a fault kind the guards do not cover costs:
// schedules of the normal seed set with faults of kind forced in
// (Schedule.WithExposure), every ID checked, every duplicate counted
// (Options.CountAll).
func Exposure(kind string, o HuntOptions) Summary {
	o.Schedule = func(seed uint64) Schedule { return NewSchedule(seed).WithExposure(kind) }
	o.Run.CountAll = true
	return Hunt(o)
}

// IsUncovered reports whether kind is listed in Uncovered.
func IsUncovered(kind string) bool { return slices.Contains(Uncovered, kind) }
