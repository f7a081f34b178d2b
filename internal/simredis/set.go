package simredis

var setCommands = []*command{
	{name: "sadd", arity: -3, run: cmdSAdd},
	{name: "sismember", arity: 3, run: cmdSIsMember},
	{name: "srandmember", arity: -2, run: cmdSRandMember},
}

// readSet returns the set in key (nil when missing) or false on a key of
// another type.
func (s *Server) readSet(key string) (*ordered, bool) {
	v, ok := s.getKind(key, kindSet)
	if v == nil {
		return nil, ok
	}
	return v.set, true
}

func cmdSAdd(s *Server, args []string) any {
	v, ok := s.writable(args[1], kindSet)
	if !ok {
		return errWrongType
	}
	var n int64
	for _, m := range args[2:] {
		if v.set.find(m) < 0 {
			v.set.push(m)
			n++
		}
	}
	return n
}

func cmdSIsMember(s *Server, args []string) any {
	set, ok := s.readSet(args[1])
	if !ok {
		return errWrongType
	}
	if set != nil && set.find(args[2]) >= 0 {
		return int64(1)
	}
	return int64(0)
}

// cmdSRandMember is SRANDMEMBER key [count]. A positive count draws
// distinct members (all of them, in set order, when count >= the size), a
// negative one -count members that may repeat. Draws come from the
// server's rng, so they replay with its seed; which members Redis would
// pick differs.
func cmdSRandMember(s *Server, args []string) any {
	if len(args) > 3 {
		return errSyntax
	}
	set, ok := s.readSet(args[1])
	if !ok {
		return errWrongType
	}
	if len(args) == 2 {
		if set == nil {
			return nil
		}
		return set.items[s.rng.IntN(set.len())]
	}
	count, ok := parseInt(args[2])
	if !ok {
		return errNotInt
	}
	out := []any{}
	if set == nil || count == 0 {
		return out
	}
	n := set.len()
	switch {
	case count < 0:
		if count < -1<<32 {
			return Error("ERR value is out of range")
		}
		for range -count {
			out = append(out, set.items[s.rng.IntN(n)])
		}
	case count >= int64(n):
		for _, m := range set.items {
			out = append(out, m)
		}
	default:
		for _, i := range sample(s.rng.IntN, n, int(count)) {
			out = append(out, set.items[i])
		}
	}
	return out
}

// sample returns k distinct positions below n (0 < k < n), drawn with
// intN: by rejection when k is small next to n (claim.lua asks for 8 of a
// registry's members), else by a partial Fisher-Yates shuffle.
func sample(intN func(int) int, n, k int) []int {
	out := make([]int, 0, k)
	if 4*k <= n {
		var seen map[int]bool // past a few draws a scan of out costs more
		if k > 16 {
			seen = make(map[int]bool, k)
		}
	draw:
		for len(out) < k {
			j := intN(n)
			if seen != nil {
				if seen[j] {
					continue
				}
				seen[j] = true
			} else {
				for _, x := range out {
					if x == j {
						continue draw
					}
				}
			}
			out = append(out, j)
		}
		return out
	}
	perm := make([]int, n)
	for i := range perm {
		perm[i] = i
	}
	for i := range k {
		j := i + intN(n-i)
		perm[i], perm[j] = perm[j], perm[i]
	}
	return append(out, perm[:k]...)
}
