package interop

import (
	"strconv"
	"testing"
)

const infoFlaked = "# Flaked\r\nmode:flake\r\nmachine_ids:12345\r\nlayout:time=39,seq=8,machine=16,tick=10ms,epoch=2025-01-01T00:00:00Z\r\nready:1\r\n"

// TestExact_CatchesAFloatRoundedID: an ID that went through a float64
// (a JavaScript Number) comes back a multiple of 16, so PARSE of it names
// another machine ID, and exact says so.
func TestExact_CatchesAFloatRoundedID(t *testing.T) {
	l, err := layoutFromInfo(infoFlaked)
	if err != nil {
		t.Fatal(err)
	}
	if l.seqBits != 8 || l.machineBits != 16 || !l.machines[12345] || len(l.machines) != 1 {
		t.Fatalf("layoutFromInfo: %+v", l)
	}
	const tick, seq, machine = 5978107823, 7, 12345
	id := uint64(tick)<<24 | seq<<16 | machine
	if err := l.exact(strconv.FormatUint(id, 10), tick, seq, machine, "flake"); err != nil {
		t.Fatalf("the exact ID: %v", err)
	}
	rounded := uint64(float64(id))
	if rounded == id {
		t.Fatalf("%d survived a float64: pick an ID above 2^53", id)
	}
	rt, rs, rm := int64(rounded>>24), int64(rounded>>16&0xff), int64(rounded&0xffff)
	if err := l.exact(strconv.FormatUint(rounded, 10), rt, rs, rm, "flake"); err == nil {
		t.Errorf("the rounded ID %d (of %d) passed", rounded, id)
	}
	if err := l.exact(strconv.FormatUint(id, 10), tick, seq, machine+1, "flake"); err == nil {
		t.Error("parts that make another ID passed")
	}
	if _, err := layoutFromInfo("# Flaked\r\nmode:flake\r\n"); err == nil {
		t.Error("INFO without layout or machine_ids passed")
	}
}
