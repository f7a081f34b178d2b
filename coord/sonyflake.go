package coord

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/flaked/flaked/flake"
)

// Sonyflake adapts the registry to github.com/sony/sonyflake's hooks:
//
//	h := reg.Sonyflake(ctx)
//	sf, err := sonyflake.New(sonyflake.Settings{ // v2
//		MachineID: h.MachineID, CheckMachineID: h.CheckMachineID})
//	defer h.Close(ctx)
//
// (v1: MachineIDv1 and CheckMachineIDv1.) MachineID claims a machine ID
// whose reservation is already in the past, so sonyflake, which cannot
// wait for a floor, starts safely; then it keeps the lease alive and the
// reservation a lease TTL ahead of the clock until Close. What sonyflake
// does not do, and the adapter cannot do for it, is stop issuing when the
// lease is lost: a process paused longer than the lease TTL can collide
// with the next owner of its ID. flaked's own generator stops at its
// reservation instead.
type Sonyflake struct {
	reg *Registry
	ctx context.Context

	mu     sync.Mutex
	lease  *Lease
	cancel context.CancelFunc
	done   chan struct{}
}

// Sonyflake returns the hooks; ctx bounds the background renewals.
func (r *Registry) Sonyflake(ctx context.Context) *Sonyflake {
	return &Sonyflake{reg: r, ctx: ctx}
}

// MachineID is sonyflake v2's Settings.MachineID.
func (s *Sonyflake) MachineID() (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lease != nil {
		return s.lease.ids[0], nil
	}
	if w := s.reg.opts.Layout.BitsID(); w != flake.MaxBitsID {
		// sonyflake's IDs are 63 bits wide: in a narrower fleet they would
		// be IDs of another layout, which can equal the fleet's.
		return 0, fmt.Errorf("%w: sonyflake makes %d-bit IDs, the registry's layout has %d-bit IDs", ErrInvalidOptions, flake.MaxBitsID, w)
	}
	ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
	defer cancel()
	lease, err := s.reg.Claim(ctx, ClaimOptions{StartNow: true})
	if err != nil {
		return 0, err
	}
	ttl := s.reg.opts.LeaseTTL
	ahead := int64(ttl / s.reg.opts.Layout.TimeUnit)
	now := func() int64 { return s.reg.opts.Layout.Tick(s.reg.opts.Clock.Now()) }
	if _, err := lease.Reserve(ctx, now()+ahead); err != nil {
		_ = lease.Release(context.WithoutCancel(ctx), lease.Floor())
		return 0, err
	}
	s.lease = lease
	kctx, kcancel := context.WithCancel(s.ctx)
	s.cancel, s.done = kcancel, make(chan struct{})
	go func() {
		defer close(s.done)
		t := time.NewTicker(ttl / 3)
		defer t.Stop()
		for {
			select {
			case <-kctx.Done():
				return
			case <-lease.Done():
				return
			case <-t.C:
				rctx, rcancel := context.WithTimeout(kctx, ttl/3)
				_, _ = lease.Reserve(rctx, now()+ahead)
				rcancel()
			}
		}
	}()
	return lease.ids[0], nil
}

// CheckMachineID is sonyflake v2's Settings.CheckMachineID: true only when
// this process holds the lease of id.
func (s *Sonyflake) CheckMachineID(id int) bool {
	s.mu.Lock()
	lease := s.lease
	s.mu.Unlock()
	if lease == nil || lease.ids[0] != id {
		return false
	}
	ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
	defer cancel()
	ok, err := lease.Check(ctx)
	return err == nil && ok
}

// MachineIDv1 is sonyflake v1's Settings.MachineID. It needs a layout of
// at most 16 machine bits.
func (s *Sonyflake) MachineIDv1() (uint16, error) {
	if s.reg.opts.Layout.BitsMachineID > 16 {
		return 0, fmt.Errorf("%w: sonyflake v1 takes 16-bit machine IDs, the registry layout has %d bits",
			ErrInvalidOptions, s.reg.opts.Layout.BitsMachineID)
	}
	id, err := s.MachineID()
	if err != nil {
		return 0, err
	}
	if id > math.MaxUint16 {
		return 0, errors.New("machine ID above 65535")
	}
	return uint16(id), nil
}

// CheckMachineIDv1 is sonyflake v1's Settings.CheckMachineID.
func (s *Sonyflake) CheckMachineIDv1(id uint16) bool { return s.CheckMachineID(int(id)) }

// Close stops the renewals and releases the machine ID, recording the
// current tick as its last. Call it after the sonyflake instance is done.
func (s *Sonyflake) Close(ctx context.Context) error {
	s.mu.Lock()
	lease, cancel, done := s.lease, s.cancel, s.done
	s.lease = nil
	s.mu.Unlock()
	if lease == nil {
		return nil
	}
	cancel()
	<-done
	return lease.Release(ctx, s.reg.opts.Layout.Tick(s.reg.opts.Clock.Now()))
}
