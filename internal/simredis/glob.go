package simredis

// globMatch reports whether s matches the glob pattern p as Redis's KEYS
// and SCAN MATCH read it (stringmatchlen): * any run, ? one byte, [abc],
// [^abc] and [a-z] classes, \ escaping the next byte.
func globMatch(p, s string) bool {
	for len(p) > 0 {
		switch p[0] {
		case '*':
			for len(p) > 1 && p[1] == '*' {
				p = p[1:]
			}
			if len(p) == 1 {
				return true
			}
			for i := 0; i <= len(s); i++ {
				if globMatch(p[1:], s[i:]) {
					return true
				}
			}
			return false
		case '?':
			if len(s) == 0 {
				return false
			}
		case '[':
			if len(s) == 0 {
				return false
			}
			var ok bool
			if ok, p = matchClass(p[1:], s[0]); !ok {
				return false
			}
			s = s[1:]
			continue
		case '\\':
			if len(p) > 1 {
				p = p[1:]
			}
			fallthrough
		default:
			if len(s) == 0 || p[0] != s[0] {
				return false
			}
		}
		p, s = p[1:], s[1:]
	}
	return len(s) == 0
}

// matchClass matches c against the class p starts (after its '['), and
// returns the pattern after the closing ']'. An unterminated class ends
// with the pattern, as in Redis.
func matchClass(p string, c byte) (bool, string) {
	not := len(p) > 0 && p[0] == '^'
	if not {
		p = p[1:]
	}
	match := false
	for len(p) > 0 && p[0] != ']' {
		switch {
		case p[0] == '\\' && len(p) > 1:
			match = match || p[1] == c
			p = p[2:]
		case len(p) > 2 && p[1] == '-':
			lo, hi := min(p[0], p[2]), max(p[0], p[2])
			match = match || lo <= c && c <= hi
			p = p[3:]
		default:
			match = match || p[0] == c
			p = p[1:]
		}
	}
	if len(p) > 0 {
		p = p[1:]
	}
	return match != not, p
}
