package interop

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"
)

// daemonLayout is what INFO flaked says of the ID layout: enough to put
// PARSE's parts together again.
type daemonLayout struct {
	seqBits, machineBits uint
	machines             map[int64]bool
}

// layoutFromInfo reads layout (time=..,seq=..,machine=..,...) and
// machine_ids from the text of INFO flaked.
func layoutFromInfo(info string) (daemonLayout, error) {
	l := daemonLayout{machines: map[int64]bool{}}
	var haveLayout bool
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		k, v, _ := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		switch k {
		case "layout":
			for _, kv := range strings.Split(v, ",") {
				name, n, _ := strings.Cut(kv, "=")
				bits, err := strconv.ParseUint(n, 10, 8)
				switch {
				case name != "seq" && name != "machine":
				case err != nil:
					return l, fmt.Errorf("INFO layout %q: %v", v, err)
				case name == "seq":
					l.seqBits, haveLayout = uint(bits), true
				default:
					l.machineBits = uint(bits)
				}
			}
		case "machine_ids":
			for _, m := range strings.Split(v, ",") {
				id, err := strconv.ParseInt(m, 10, 64)
				if err != nil {
					return l, fmt.Errorf("INFO machine_ids %q: %v", v, err)
				}
				l.machines[id] = true
			}
		}
	}
	if !haveLayout || l.machineBits == 0 || len(l.machines) == 0 {
		return l, fmt.Errorf("INFO flaked has no layout or machine_ids:\n%s", info)
	}
	return l, nil
}

// exact checks an ID's decimal text against PARSE's reply for it (time,
// tick, sequence, machine, mode): the parts put together again give the
// same text, under one of the daemon's machine IDs.
func (l daemonLayout) exact(text string, tick, seq, machine int64, mode string) error {
	whole := uint64(tick)<<(l.seqBits+l.machineBits) | uint64(seq)<<l.machineBits | uint64(machine)
	switch {
	case mode != "flake":
		return fmt.Errorf("PARSE %s: mode %q, want flake", text, mode)
	case !l.machines[machine]:
		return fmt.Errorf("PARSE %s: machine %d is not one of the daemon's %v", text, machine, l.machines)
	case strconv.FormatUint(whole, 10) != text:
		return fmt.Errorf("PARSE %s: parts %d/%d/%d make %d", text, tick, seq, machine, whole)
	}
	return nil
}

func f2s(n int64) string { return strconv.FormatInt(n, 10) }

func toString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return fmt.Sprint(v)
}
