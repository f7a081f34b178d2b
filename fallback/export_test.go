package fallback

// FetchDone returns a channel closed when the fetch in flight ends (closed
// already when none is in flight), so tests wait on it instead of sleeping.
func (c *Counter) FetchDone() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r := c.buf.RunLocked(); r != nil {
		return r.Done()
	}
	ch := make(chan struct{})
	close(ch)
	return ch
}
