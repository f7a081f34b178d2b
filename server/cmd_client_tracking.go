package server

import (
	"slices"
	"strings"
)

// CLIENT TRACKING, CACHING, GETREDIR and TRACKINGINFO: client-side
// caching, which RESP3 clients (rueidis) turn on when they connect.
// flaked accepts it and keeps the state Redis would report, but never
// sends an invalidation: there are no keys, so no cached value can go
// stale. The checks and errors are Redis 7's.

// tracking is a connection's CLIENT TRACKING state.
type tracking struct {
	on, bcast, optin, optout, noloop bool
	caching                          string // "yes" or "no": CLIENT CACHING's, until the next command but CLIENT
	redir                            int64  // the client invalidations would go to; 0: this one
	prefixes                         []string
}

// CLIENT TRACKING on|off [REDIRECT id] [PREFIX p ...] [BCAST] [OPTIN]
// [OPTOUT] [NOLOOP]
func clientTracking(c *conn, args [][]byte) {
	opt, ok := c.trackingOptions(args[3:])
	if !ok {
		return
	}
	switch {
	case equalFold(args[2], "on"):
		if msg := c.trackingConflict(opt); msg != "" {
			c.writeError(msg)
			return
		}
		opt.on = true
		c.mu.Lock()
		opt.prefixes = slices.Concat(c.trk.prefixes, opt.prefixes)
		c.trk = opt
		c.mu.Unlock()
	case equalFold(args[2], "off"):
		c.mu.Lock()
		c.trk = tracking{}
		c.mu.Unlock()
	default:
		c.writeError("ERR syntax error")
		return
	}
	c.writeOK()
}

// trackingOptions reads CLIENT TRACKING's options, or answers why not.
func (c *conn) trackingOptions(args [][]byte) (opt tracking, ok bool) {
	redirSet := false
	for j := 0; j < len(args); j++ {
		more := len(args) - 1 - j
		switch a := strings.ToLower(string(args[j])); {
		case a == "redirect" && more > 0:
			j++
			if redirSet {
				c.writeError("ERR A client can only redirect to a single other client")
				return opt, false
			}
			id, ok := parseInt(args[j])
			if !ok {
				c.writeError("ERR value is not an integer or out of range")
				return opt, false
			}
			if id <= 0 || !c.s.hasClient(uint64(id)) {
				c.writeError("ERR The client ID you want redirect to does not exist")
				return opt, false
			}
			opt.redir, redirSet = id, true
		case a == "bcast":
			opt.bcast = true
		case a == "optin":
			opt.optin = true
		case a == "optout":
			opt.optout = true
		case a == "noloop":
			opt.noloop = true
		case a == "prefix" && more > 0:
			j++
			opt.prefixes = append(opt.prefixes, string(args[j]))
		default:
			c.writeError("ERR syntax error")
			return opt, false
		}
	}
	return opt, true
}

// trackingConflict is Redis's error for options that do not go together,
// or with the tracking already on, or "".
func (c *conn) trackingConflict(opt tracking) string {
	c.mu.Lock()
	cur := c.trk
	c.mu.Unlock()
	switch {
	case !opt.bcast && len(opt.prefixes) > 0:
		return "ERR PREFIX option requires BCAST mode to be enabled"
	case cur.on && cur.bcast != opt.bcast:
		return "ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode."
	case opt.bcast && (opt.optin || opt.optout):
		return "ERR OPTIN and OPTOUT are not compatible with BCAST"
	case opt.optin && opt.optout:
		return "ERR You can't specify both OPTIN mode and OPTOUT mode"
	case opt.optin && cur.optout || opt.optout && cur.optin:
		return "ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode."
	}
	return ""
}

// CLIENT CACHING yes|no: the next command's keys are (not) tracked; with
// no keys, only Redis's checks remain.
func clientCaching(c *conn, args [][]byte) {
	c.mu.Lock()
	cur := c.trk
	c.mu.Unlock()
	switch {
	case !cur.on:
		c.writeError("ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled")
	case equalFold(args[2], "yes") && !cur.optin:
		c.writeError("ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.")
	case equalFold(args[2], "no") && !cur.optout:
		c.writeError("ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.")
	case equalFold(args[2], "yes"), equalFold(args[2], "no"):
		c.mu.Lock()
		c.trk.caching = strings.ToLower(string(args[2]))
		c.mu.Unlock()
		c.caching = true
		c.writeOK()
	default:
		c.writeError("ERR syntax error")
	}
}

// cachingDone forgets CLIENT CACHING's yes or no once a command other
// than CLIENT ran outside MULTI, as Redis does.
func (c *conn) cachingDone(cmd *command) {
	if c.tx != nil || cmd.name == "client" {
		return
	}
	c.caching = false
	c.mu.Lock()
	c.trk.caching = ""
	c.mu.Unlock()
}

// CLIENT GETREDIR: the redirect client's ID, 0 for none, -1 when tracking
// is off.
func clientGetRedir(c *conn, _ [][]byte) {
	c.mu.Lock()
	cur := c.trk
	c.mu.Unlock()
	if !cur.on {
		c.writeInt(-1)
		return
	}
	c.writeInt(cur.redir)
}

// CLIENT TRACKINGINFO: flags, redirect and prefixes, as a map.
func clientTrackingInfo(c *conn, _ [][]byte) {
	c.mu.Lock()
	cur := c.trk
	c.mu.Unlock()
	flags := []string{"off"}
	redir := int64(-1)
	if cur.on {
		flags, redir = []string{"on"}, cur.redir
		for _, f := range []struct {
			set  bool
			name string
		}{
			{cur.bcast, "bcast"}, {cur.optin, "optin"}, {cur.optin && cur.caching == "yes", "caching-yes"},
			{cur.optout, "optout"}, {cur.optout && cur.caching == "no", "caching-no"}, {cur.noloop, "noloop"},
		} {
			if f.set {
				flags = append(flags, f.name)
			}
		}
	}
	c.writeMap(3)
	c.writeBulkString("flags")
	c.writeSet(len(flags))
	for _, f := range flags {
		c.writeBulkString(f)
	}
	c.writeBulkString("redirect")
	c.writeInt(redir)
	c.writeBulkString("prefixes")
	c.writeArray(len(cur.prefixes))
	for _, p := range cur.prefixes {
		c.writeBulkString(p)
	}
}

// hasClient reports whether a client with this ID is connected.
func (s *Server) hasClient(id uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		if c.id == id {
			return true
		}
	}
	return false
}
