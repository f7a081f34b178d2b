package lua

import "strconv"

// The encodings the scripts' Args types share (claim.go, renew.go, ...).
// ARGV values stay Go numbers and strings: go-redis writes them in decimal
// (floats in their shortest form), as the scripts read them.

// appendInts appends ids as separate ARGV values: the tail of a script's
// ARGV ("20.. machine IDs").
func appendInts(argv []any, ids []int) []any {
	for _, id := range ids {
		argv = append(argv, id)
	}
	return argv
}

// joinInts is ids as one ARGV value, comma separated ("1,7,12").
func joinInts(ids []int) string {
	b := make([]byte, 0, len(ids)*6)
	for i, x := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(x), 10)
	}
	return string(b)
}
