package sim

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"time"
)

// HuntOptions configure Hunt.
type HuntOptions struct {
	From, Count uint64 // seeds From .. From+Count-1
	Workers     int    // 0: GOMAXPROCS
	Run         Options
	// StopAtFirst ends the hunt at the first failing seed.
	StopAtFirst bool
	// Progress, if set, is called about every second with the summary so
	// far.
	Progress func(Summary)
	// Schedule draws the schedule of a seed (nil: NewSchedule).
	Schedule func(seed uint64) Schedule
}

// Summary is what a hunt found.
type Summary struct {
	Schedules int
	Virtual   time.Duration
	IDs       int64
	// SeqValues and SeqRestores: the sequence client's values checked and
	// operator restores (Options.Sequences).
	SeqValues, SeqRestores int64
	Scripts                uint64 // script calls Redis ran
	Faults                 map[string]int
	Failures               []Found
	// Violations counts failing IDs (every one under Options.CountAll).
	Violations int
	// Strays: starts with another layout refused (layout mismatch), and
	// started in counter mode without issuing (Result); NoRegistry: starts
	// refused for want of a registry.
	StraysRefused, StraysStarted, NoRegistry int
	Elapsed                                  time.Duration
	Coverage                                 Coverage
}

// Found is a failing seed.
type Found struct {
	Schedule Schedule
	Result   Result
}

func (f Found) String() string {
	return fmt.Sprintf("seed %d: %v", f.Schedule.Seed, f.Result.Failure)
}

// Hunt runs the schedules of a range of seeds on parallel workers.
func Hunt(o HuntOptions) Summary {
	workers := o.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	// A run allocates much and keeps little: collect less often.
	defer debug.SetGCPercent(debug.SetGCPercent(1000))
	start := time.Now()
	sum := Summary{Faults: map[string]int{}}
	var mu sync.Mutex
	var next uint64
	stop := false
	lastProgress := time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				if stop || next >= o.Count {
					mu.Unlock()
					return
				}
				seed := o.From + next
				next++
				mu.Unlock()
				var s Schedule
				if o.Schedule != nil {
					s = o.Schedule(seed)
				} else {
					s = NewSchedule(seed)
				}
				res := Run(s, o.Run)
				mu.Lock()
				sum.Schedules++
				sum.Virtual += res.Virtual
				sum.IDs += int64(res.IDs)
				sum.SeqValues += int64(res.SeqValues)
				sum.SeqRestores += int64(res.SeqRestores)
				sum.Scripts += res.Scripts
				for k, v := range res.Faults {
					sum.Faults[k] += v
				}
				sum.Coverage.add(res.Coverage)
				sum.Violations += res.Violations
				sum.StraysRefused += res.StraysRefused
				sum.StraysStarted += res.StraysStarted
				sum.NoRegistry += res.NoRegistry
				if res.Failure != nil {
					sum.Failures = append(sum.Failures, Found{Schedule: s, Result: res})
					stop = stop || o.StopAtFirst
				}
				if o.Progress != nil && time.Since(lastProgress) > time.Second {
					lastProgress = time.Now()
					sum.Elapsed = time.Since(start)
					o.Progress(sum)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	sum.Elapsed = time.Since(start)
	return sum
}

// Shrink removes faults from a failing schedule while it still fails
// (under the same options), and returns the smallest schedule found with
// its result: the fewest faults that still produce a failure.
func Shrink(s Schedule, o Options) (Schedule, Result) {
	best := Run(s, o)
	if best.Failure == nil {
		return s, best
	}
	for chunk := max(len(s.Faults)/2, 1); chunk >= 1; chunk /= 2 {
		for i := 0; i < len(s.Faults); {
			try := s
			try.Faults = append(append([]Fault(nil), s.Faults[:i]...), s.Faults[min(i+chunk, len(s.Faults)):]...)
			if res := Run(try, o); res.Failure != nil {
				s, best = try, res
				continue // the same i now names the next chunk
			}
			i += chunk
		}
	}
	return s, best
}
