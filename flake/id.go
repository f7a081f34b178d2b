package flake

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrInvalidID is wrapped by the ID parsers.
var ErrInvalidID = errors.New("invalid ID")

// MaxID is the largest ID: IDs use 63 bits, so they fit an int64 as well.
const MaxID = 1<<63 - 1

// FormatID returns the decimal form of an ID.
func FormatID(id uint64) string { return strconv.FormatUint(id, 10) }

// ParseID reads a decimal ID in 0..2^63-1.
func ParseID(s string) (uint64, error) {
	id, err := strconv.ParseUint(s, 10, 63)
	if err != nil {
		return 0, fmt.Errorf("%w: %q: want a decimal integer in 0..%d", ErrInvalidID, s, uint64(MaxID))
	}
	return id, nil
}

// crockford is Crockford's base32 alphabet: no I, L, O, U; digits sort
// before letters, so fixed-width strings sort like the IDs.
const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// Base32Len is the width of FormatBase32's output.
const Base32Len = 13

// FormatBase32 returns the ID as 13 characters of Crockford base32. The
// strings sort in the same order as the IDs, which makes them good keys.
func FormatBase32(id uint64) string {
	var b [Base32Len]byte
	for i := Base32Len - 1; i >= 0; i-- {
		b[i] = crockford[id&31]
		id >>= 5
	}
	return string(b[:])
}

// ParseBase32 reads FormatBase32's output. It accepts lower case and the
// usual Crockford aliases (O for 0, I and L for 1).
func ParseBase32(s string) (uint64, error) {
	if len(s) != Base32Len {
		return 0, fmt.Errorf("%w: %q: want %d Crockford base32 characters", ErrInvalidID, s, Base32Len)
	}
	var id uint64
	for i, c := range strings.ToUpper(s) {
		switch c {
		case 'O':
			c = '0'
		case 'I', 'L':
			c = '1'
		}
		v := strings.IndexRune(crockford, c)
		if v < 0 {
			return 0, fmt.Errorf("%w: %q: %q is not a Crockford base32 character", ErrInvalidID, s, c)
		}
		if i == 0 && v > 7 { // the first character holds bits 60..64
			return 0, fmt.Errorf("%w: %q is above 2^63-1", ErrInvalidID, s)
		}
		id = id<<5 | uint64(v)
	}
	return id, nil
}
