package node

// Crash stops the node the way kill -9 would, as far as the fleet can
// tell: nothing more is issued, nothing is released, the state file lock
// and the embedded store go away.
func (n *Node) Crash() {
	n.closed.Do(func() {
		n.gen.Close()
		n.lease.Abandon()
		n.cleanup()
	})
}
